import { existsSync, readFileSync } from "node:fs";
import { resolve } from "node:path";
import { z } from "zod";
import { AgentloopError } from "../core/errors.js";

const stdioServer = z.strictObject({
  command: z.string().min(1),
  args: z.array(z.string()).optional(),
  env: z.record(z.string(), z.string()).optional(),
  cwd: z.string().optional(),
  optional: z.boolean().optional(),
  type: z.literal("stdio").optional(),
});
const httpServer = z.strictObject({
  url: z.url(),
  headers: z.record(z.string(), z.string()).optional(),
  optional: z.boolean().optional(),
  type: z.enum(["http", "streamable-http", "sse"]).optional(),
});

/** The shape of `agentloop.json` (SPEC section 5). Unknown keys are errors. */
export const configFileSchema = z.strictObject({
  $schema: z.string().optional(),
  model: z.string().min(1).optional(),
  provider: z.enum(["openai", "anthropic"]).optional(),
  baseUrl: z.url().optional(),
  azure: z
    .strictObject({ apiVersion: z.string().min(1), deployment: z.string().min(1).optional() })
    .optional(),
  instructions: z.string().optional(),
  maxIterations: z.number().int().positive().optional(),
  maxContextTokens: z.number().int().positive().optional(),
  tokenBudget: z.number().int().positive().optional(),
  costBudget: z.number().positive().optional(),
  timeout: z.number().positive().optional(),
  mode: z.enum(["natural", "explicit"]).optional(),
  toolProtocol: z.enum(["native", "xml"]).optional(),
  builtinTools: z.boolean().optional(),
  mcpServers: z.record(z.string(), z.union([stdioServer, httpServer])).optional(),
});

export type ConfigFile = z.infer<typeof configFileSchema>;

/**
 * Reads the config file: `explicitPath` when given (it must exist), else `./agentloop.json`
 * when present, else an empty config.
 * @throws AgentloopError("config") with one line naming the file and the key.
 */
export function loadConfigFile(
  explicitPath: string | undefined,
  cwd = process.cwd(),
): { path?: string; config: ConfigFile } {
  const path = resolve(cwd, explicitPath ?? "agentloop.json");
  if (!existsSync(path)) {
    if (explicitPath === undefined) return { config: {} };
    throw new AgentloopError("config", `Config file not found: ${explicitPath}. Check the --config path.`);
  }
  const name = explicitPath ?? "agentloop.json";
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, "utf8"));
  } catch (error) {
    const detail = error instanceof Error ? error.message : String(error);
    throw new AgentloopError(
      "config",
      `${name} is not valid JSON (${detail}). Fix the file or pass another --config.`,
    );
  }
  const parsed = configFileSchema.safeParse(raw);
  if (!parsed.success) {
    throw new AgentloopError("config", `${name}: ${describeIssue(parsed.error.issues[0])}`);
  }
  return { path, config: parsed.data };
}

function describeIssue(issue: z.core.$ZodIssue | undefined): string {
  if (!issue) return "invalid configuration.";
  const where = issue.path.map(String).join(".");
  if (issue.code === "unrecognized_keys") {
    const keys = issue.keys.map((key) => (where ? `${where}.${key}` : key));
    return `unknown key '${keys.join("', '")}'. Remove it or check its spelling (see the README's config section).`;
  }
  if (issue.code === "invalid_union" && where.startsWith("mcpServers.")) {
    return `'${where}' must have either "command" (stdio) or "url" (Streamable HTTP), with no other unknown keys.`;
  }
  return `'${where || "(root)"}' is invalid: ${issue.message}.`;
}

/** The flags common to every command, as commander parses them. */
export interface CliFlags {
  model?: string;
  baseUrl?: string;
  provider?: string;
  config?: string;
  system?: string;
  maxIterations?: number;
  mode?: string;
  toolProtocol?: string;
  builtinTools: boolean;
  timeout?: number;
  maxContextTokens?: number;
  tokenBudget?: number;
  costBudget?: number;
  session?: string;
  json?: boolean;
  verbose?: boolean;
}

/** What a command runs with, after flag > environment > config file > default. */
export interface Settings {
  provider: "openai" | "anthropic";
  model: string;
  baseUrl?: string;
  apiKey?: string;
  instructions: string;
  maxIterations: number;
  mode: "natural" | "explicit";
  toolProtocol: "native" | "xml";
  builtinTools: boolean;
  timeoutMs?: number;
  maxContextTokens?: number;
  tokenBudget?: number;
  costBudget?: number;
  mcpServers: NonNullable<ConfigFile["mcpServers"]>;
  /** The config file the settings came from, as the user named it: named in MCP server errors. */
  configFile?: string;
  /** Azure OpenAI / AI DIAL deployments: `api-key` header and `api-version` query. */
  azure?: NonNullable<ConfigFile["azure"]>;
}

export const DEFAULT_MODEL = { openai: "gpt-4o-mini", anthropic: "claude-sonnet-5-5" } as const;

type Env = Record<string, string | undefined>;

/** @throws AgentloopError("config") for a bad value, naming where it came from. */
export function resolveSettings(flags: CliFlags, env: Env, config: ConfigFile): Settings {
  const provider = oneOf("provider", flags.provider ?? nonEmpty(env.AGENTLOOP_PROVIDER) ?? config.provider, [
    "openai",
    "anthropic",
  ]);
  const prefix = provider === "anthropic" ? "ANTHROPIC" : "OPENAI";
  const settings: Settings = {
    provider: provider ?? "openai",
    model:
      flags.model ?? nonEmpty(env.AGENTLOOP_MODEL) ?? config.model ?? DEFAULT_MODEL[provider ?? "openai"],
    instructions: flags.system ?? config.instructions ?? "",
    maxIterations: flags.maxIterations ?? config.maxIterations ?? 10,
    mode: oneOf("mode", flags.mode ?? config.mode, ["natural", "explicit"]) ?? "natural",
    toolProtocol:
      oneOf("tool-protocol", flags.toolProtocol ?? config.toolProtocol, ["native", "xml"]) ?? "native",
    builtinTools: flags.builtinTools && config.builtinTools !== false,
    mcpServers: config.mcpServers ?? {},
  };
  if (config.azure) settings.azure = config.azure;
  const baseUrl = flags.baseUrl ?? nonEmpty(env[`${prefix}_BASE_URL`]) ?? config.baseUrl;
  if (baseUrl !== undefined) settings.baseUrl = baseUrl;
  const apiKey = nonEmpty(env[`${prefix}_API_KEY`]);
  if (apiKey !== undefined) settings.apiKey = apiKey;
  const timeout = flags.timeout ?? config.timeout;
  if (timeout !== undefined) settings.timeoutMs = Math.round(timeout * 1000);
  const maxContextTokens = flags.maxContextTokens ?? config.maxContextTokens;
  if (maxContextTokens !== undefined) settings.maxContextTokens = maxContextTokens;
  const tokenBudget = flags.tokenBudget ?? config.tokenBudget;
  if (tokenBudget !== undefined) settings.tokenBudget = tokenBudget;
  const costBudget = flags.costBudget ?? config.costBudget;
  if (costBudget !== undefined) settings.costBudget = costBudget;
  return settings;
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value.trim() === "" ? undefined : value;
}

function oneOf<T extends string>(
  name: string,
  value: string | undefined,
  allowed: readonly T[],
): T | undefined {
  if (value === undefined) return undefined;
  if ((allowed as readonly string[]).includes(value)) return value as T;
  throw new AgentloopError("config", `Invalid ${name} '${value}': use ${allowed.join(" or ")}.`);
}
