// The configured sub-agents (config `"agents"`, SPEC section 10) as agents: each with its model
// (the top-level one unless it names its own), the top-level tools its `tools` select, and the
// sub-agents it may delegate to in turn.
import { Agent, type AgentOptions, type AnyAgent } from "../agent/agent.js";
import { AgentloopError } from "../core/errors.js";
import type { Model } from "../models/adapter.js";
import { resolvePrice } from "../models/pricing.js";
import { globMatcher } from "../tools/glob.js";
import type { Tool } from "../tools/tool.js";
import { DEFAULT_MODEL, type Settings } from "./config.js";
import type { AgentConfig } from "./config-agents.js";
import { isHttpUrl } from "./config-file.js";

/** The settings a sub-agent's model is made with: its own model, provider and base URL over the top level's. */
function modelSettings(
  settings: Settings,
  config: AgentConfig,
  env: NodeJS.ProcessEnv,
): Settings | undefined {
  if (config.model === undefined && config.provider === undefined && config.baseUrl === undefined)
    return undefined;
  const provider = config.provider ?? settings.provider;
  const same =
    provider === settings.provider || (provider !== "anthropic" && settings.provider !== "anthropic");
  const prefix = provider === "anthropic" ? "ANTHROPIC" : "OPENAI";
  const baseUrl = config.baseUrl ?? (same ? settings.baseUrl : env[`${prefix}_BASE_URL`] || undefined);
  const apiKey = same ? settings.apiKey : env[`${prefix}_API_KEY`] || undefined;
  const { baseUrl: _url, apiKey: _key, ...rest } = settings;
  return {
    ...rest,
    provider,
    model: config.model ?? (provider === settings.provider ? settings.model : DEFAULT_MODEL[provider]),
    ...(baseUrl !== undefined && { baseUrl }),
    ...(apiKey !== undefined && { apiKey }),
  };
}

/** Each sub-agent's model, made once (the top-level `model` where it names none of its own). */
export async function subAgentModels(
  settings: Settings,
  model: Model,
  createModel: (settings: Settings) => Promise<Model>,
): Promise<Map<string, Model>> {
  const models = new Map<string, Model>();
  const file = settings.configFile ?? "agentloop.json";
  for (const [name, config] of Object.entries(settings.agents ?? {})) {
    if (config.baseUrl !== undefined && !isHttpUrl(config.baseUrl))
      throw new AgentloopError(
        "config",
        `'agents.${name}.baseUrl' in ${file} must be an http:// or https:// URL, got '${config.baseUrl}'.`,
      );
    const own = modelSettings(settings, config, process.env);
    const made = own ? await createModel(own) : model;
    if (settings.costBudget !== undefined && !resolvePrice(made, settings.prices))
      throw new AgentloopError(
        "config",
        `The cost budget counts every sub-agent, so it needs the price of model '${made.id}' (agents.${name}): add "prices": {"${made.id}": {"input": 0.15, "output": 0.6}} (USD per million tokens) to ${file}, or drop --cost-budget.`,
      );
    models.set(name, made);
  }
  return models;
}

/**
 * The top-level agent's sub-agents: every configured one, each built once, after those it
 * delegates to. `tools` is the top-level agent's catalogue (approval rules applied); a `tools`
 * glob that matches none of it is a warning.
 */
export function subAgents(
  settings: Settings,
  models: ReadonlyMap<string, Model>,
  tools: () => readonly Tool[],
  common: Pick<AgentOptions, "secrets" | "prices" | "maxContextTokens">,
): Record<string, AnyAgent> {
  const configs = settings.agents ?? {};
  const file = settings.configFile ?? "agentloop.json";
  const names = new Set(tools().map((tool) => tool.name));
  // The built-in tools a sub-agent's name would shadow: the delegation tool, and `mcp serve`'s run_agent.
  const taken = new Set([...names, "delegate_task", "run_agent"]);
  for (const name of Object.keys(configs)) {
    if (taken.has(name))
      throw new AgentloopError(
        "config",
        `'agents.${name}' in ${file} has the name of a tool: rename the agent (a server exposes each sub-agent as a tool of its name).`,
      );
  }
  const built = new Map<string, AnyAgent>();
  const build = (name: string): AnyAgent => {
    const done = built.get(name);
    if (done) return done;
    const config = configs[name] as AgentConfig;
    const select = config.tools ? selector(config.tools, name, file, names) : undefined;
    const agents = Object.fromEntries((config.agents ?? []).map((other) => [other, build(other)]));
    const outputSchema = config.outputSchema ?? settings.outputSchema;
    const agent = new Agent({
      model: models.get(name) as Model,
      description: config.description,
      instructions: config.instructions ?? settings.instructions,
      tools: select ? () => tools().filter(select) : [],
      ...(Object.keys(agents).length > 0 && { agents }),
      maxIterations: config.maxIterations ?? settings.maxIterations,
      mode: config.mode ?? settings.mode,
      toolProtocol: settings.toolProtocol,
      ...(outputSchema && { outputSchema }),
      ...common,
    });
    built.set(name, agent);
    return agent;
  };
  return Object.fromEntries(Object.keys(configs).map((name) => [name, build(name)]));
}

/** A matcher of an agent's `tools` (names or globs), with a warning for each that matches no tool. */
function selector(
  patterns: readonly string[],
  agent: string,
  file: string,
  names: ReadonlySet<string>,
): (tool: Tool) => boolean {
  for (const pattern of patterns) {
    const matches = globMatcher([pattern]);
    if (![...names].some(matches))
      process.stderr.write(
        `agentloop: warning: 'agents.${agent}.tools' in ${file} names '${pattern}', which matches no tool: check the name (agentloop tools lists them)\n`,
      );
  }
  const matches = globMatcher(patterns);
  return (tool) => matches(tool.name);
}
