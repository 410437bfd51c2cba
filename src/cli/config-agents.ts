// The config file's `"agents"` (SPEC section 10): each entry checked on its own, so an error names
// the entry's key and the fix in one line.
import { outputSpec } from "../agent/output.js";
import { AgentloopError, errorMessage } from "../core/errors.js";
import type { JsonSchema } from "../tools/tool.js";
import type { Zod } from "../tools/zod.js";
import { closest } from "./suggest.js";

/** A sub-agent as the config file describes it; every key but `description` may be left to the top-level agent's. */
export interface AgentConfig {
  description: string;
  instructions?: string;
  model?: string;
  provider?: "openai" | "openai-responses" | "anthropic";
  baseUrl?: string;
  /** Names or globs over the top-level agent's tools. Default: none. */
  tools?: string[];
  /** The sub-agents it may delegate to in turn. Default: none. */
  agents?: string[];
  maxIterations?: number;
  mode?: "natural" | "explicit";
  outputSchema?: JsonSchema;
}

const NAME = /^[a-zA-Z0-9_-]{1,64}$/;

/** `maxDepth`'s range: deeper trees are a mistake more often than a design. */
export const MAX_DEPTH_LIMIT = 10;

function entrySchema(z: Zod) {
  return z.strictObject({
    description: z.string().min(1),
    instructions: z.string().optional(),
    model: z.string().min(1).optional(),
    provider: z.enum(["openai", "openai-responses", "anthropic"]).optional(),
    baseUrl: z.string().min(1).optional(),
    tools: z.array(z.string().min(1)).optional(),
    agents: z.array(z.string()).optional(),
    maxIterations: z.number().int().positive().optional(),
    mode: z.enum(["natural", "explicit"]).optional(),
    outputSchema: z.record(z.string(), z.unknown()).optional(),
  });
}

/**
 * The `"agents"` entries, checked: names, keys, types, the agents each names, no delegation cycle.
 * @throws AgentloopError("config") with one line naming the key and the fix.
 */
export function agentEntries(
  z: Zod,
  entries: Record<string, unknown>,
  file: string,
): Record<string, AgentConfig> {
  const schema = entrySchema(z);
  const keys: readonly string[] = schema.keyof().options;
  const bad = (message: string) => new AgentloopError("config", message);
  const agents: Record<string, AgentConfig> = {};
  for (const [name, entry] of Object.entries(entries)) {
    const where = `agents.${name}`;
    if (!NAME.test(name))
      throw bad(
        `'${where}' in ${file}: '${name}' is not a valid agent name: use 1 to 64 of a-z A-Z 0-9 _ -.`,
      );
    if (typeof entry !== "object" || entry === null || Array.isArray(entry))
      throw bad(`'${where}' in ${file} must be an object, e.g. {"description": "Finds facts."}.`);
    const parsed = schema.safeParse(entry);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      if (issue?.code === "unrecognized_keys") {
        const key = issue.keys[0] as string;
        const fix = closest(key, keys);
        throw bad(
          `unknown key '${where}.${key}' in ${file}: ${fix ? `did you mean '${fix}'?` : `an agent takes ${keys.join(", ")}.`}`,
        );
      }
      const path = issue?.path.map(String).join(".");
      if (path === "description")
        throw bad(
          `'${where}.description' in ${file} is required: say what the agent does (the model chooses by it).`,
        );
      throw bad(
        `'${where}${path ? `.${path}` : ""}' in ${file} is invalid: ${issue?.message.replace(/^Invalid input: /, "")}.`,
      );
    }
    const config = parsed.data as AgentConfig;
    if (config.outputSchema) {
      try {
        outputSpec(config.outputSchema, `'${where}.outputSchema' in ${file}`);
      } catch (error) {
        throw bad(errorMessage(error));
      }
    }
    agents[name] = config;
  }
  for (const [name, config] of Object.entries(agents)) {
    for (const other of config.agents ?? []) {
      if (!Object.hasOwn(agents, other)) {
        const fix = closest(other, Object.keys(agents));
        throw bad(
          `'agents.${name}.agents' in ${file} names '${other}', which is not configured: ${fix ? `did you mean '${fix}'?` : `add it under "agents" or remove it.`}`,
        );
      }
    }
  }
  const cycle = findCycle(agents);
  if (cycle)
    throw bad(
      `'agents' in ${file} delegate in a circle (${cycle.join(" → ")}): remove one of those names from an "agents" list.`,
    );
  return agents;
}

/** A delegation cycle (names in order, the first repeated at the end), if any. */
function findCycle(agents: Record<string, AgentConfig>): string[] | undefined {
  const done = new Set<string>();
  const visit = (name: string, path: string[]): string[] | undefined => {
    const at = path.indexOf(name);
    if (at >= 0) return [...path.slice(at), name];
    if (done.has(name)) return undefined;
    for (const next of agents[name]?.agents ?? []) {
      const found = visit(next, [...path, name]);
      if (found) return found;
    }
    done.add(name);
    return undefined;
  };
  for (const name of Object.keys(agents)) {
    const found = visit(name, []);
    if (found) return found;
  }
  return undefined;
}
