import { DEFAULTS } from "../agent/defaults.js";
import { AgentloopError } from "../core/errors.js";
import type { McpServerConfig } from "../mcp/config.js";
import type { PriceTable } from "../models/pricing.js";
import type { JsonSchema } from "../tools/tool.js";
import type { AgentConfig } from "./config-agents.js";
import { type ConfigFile, isHttpUrl } from "./config-file.js";

export { type ConfigFile, loadConfigFile } from "./config-file.js";

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
  /** Compaction by summary (`--compact`). */
  compact?: boolean;
  session?: string;
  /** Continue the session's interrupted run. */
  resume?: boolean;
  /** Take the session over from a holder that looks alive. */
  force?: boolean;
  /** Call ids to approve (or "all"), from `--approve` (comma-separated, repeatable). */
  approve?: string[];
  /** Call ids to deny (or "all"), from `--deny`. */
  deny?: string[];
  /** Approve every call of the run. */
  yes?: boolean;
  /** A JSON Schema file the answer must match. */
  outputSchema?: string;
  /** Images (paths or http(s) URLs) sent with the prompt, from `--image` (repeatable). */
  image?: string[];
  json?: boolean;
  verbose?: boolean;
  /** `--record <file>`: record the run (SPEC section 12). */
  record?: string;
  /** `--replay <file>`: answer the model from a recording; `--replay-tools`, the tools too. */
  replay?: string;
  replayTools?: boolean;
  /** Take the recorded responses even for requests that differ. */
  replayLenient?: boolean;
}

/** What a command runs with, after flag > environment > config file > default. */
export interface Settings {
  /** `openai-responses`: the OpenAI Responses API (same key and base URL variables as `openai`). */
  provider: "openai" | "openai-responses" | "anthropic";
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
  /** Compaction by summary: on with `--compact` or config "compaction"; `model` another model id for the summaries. */
  compaction?: { at?: number; model?: string };
  mcpServers: Record<string, McpServerConfig>;
  /** Model prices (USD per million tokens) over the built-in table. */
  prices?: PriceTable;
  /** Tool names or globs whose calls always ask (`require`) or never ask (`allow`). */
  approval: { require: string[]; allow: string[] };
  /** What an MCP server's request for input gets (config "elicitation"); default "ask". */
  elicitation: "ask" | "accept-defaults" | "decline";
  /** The session store: where it is and where that came from (for messages). */
  db: { location: string; from: string };
  /** `agentloop serve`'s settings (config `"serve"`). */
  serve?: NonNullable<ConfigFile["serve"]>;
  /** The config file the settings came from, as the user named it: named in MCP server errors. */
  configFile?: string;
  /** Azure OpenAI / AI DIAL deployments: `api-key` header and `api-version` query. */
  azure?: NonNullable<ConfigFile["azure"]>;
  /** The answer's JSON Schema (`--output-schema`). */
  outputSchema?: JsonSchema;
  /** Sub-agents by name (config `"agents"`), and how deep they nest (`"maxDepth"`). */
  agents?: Record<string, AgentConfig>;
  maxDepth?: number;
}

/** The default session store, under the working directory (SPEC section 9). */
const DEFAULT_DB = ".agentloop/agentloop.db";

export const DEFAULT_MODEL = {
  openai: "gpt-4o-mini",
  "openai-responses": "gpt-4o-mini",
  anthropic: "claude-sonnet-5-5",
} as const;

type Env = Record<string, string | undefined>;

/**
 * @param configName how to name the config file in messages.
 * @throws AgentloopError("config") for a bad value, naming where it came from.
 */
export function resolveSettings(
  flags: CliFlags,
  env: Env,
  config: ConfigFile,
  configName = "agentloop.json",
): Settings {
  const fromConfig = (key: string) => `"${key}" in ${configName}`;
  const provider = pick(
    "provider",
    [
      ["--provider", flags.provider],
      ["AGENTLOOP_PROVIDER", nonEmpty(env.AGENTLOOP_PROVIDER)],
      [fromConfig("provider"), config.provider],
    ],
    ["openai", "openai-responses", "anthropic"],
  );
  const prefix = provider === "anthropic" ? "ANTHROPIC" : "OPENAI";
  const settings: Settings = {
    db: dbSetting(env, config, configName),
    provider: provider ?? "openai",
    model:
      flags.model ?? nonEmpty(env.AGENTLOOP_MODEL) ?? config.model ?? DEFAULT_MODEL[provider ?? "openai"],
    instructions: flags.system ?? config.instructions ?? "",
    maxIterations: flags.maxIterations ?? config.maxIterations ?? DEFAULTS.maxIterations,
    mode:
      pick(
        "mode",
        [
          ["--mode", flags.mode],
          [fromConfig("mode"), config.mode],
        ],
        ["natural", "explicit"],
      ) ?? "natural",
    toolProtocol:
      pick(
        "tool protocol",
        [
          ["--tool-protocol", flags.toolProtocol],
          [fromConfig("toolProtocol"), config.toolProtocol],
        ],
        ["native", "xml"],
      ) ?? "native",
    builtinTools: flags.builtinTools && config.builtinTools !== false,
    mcpServers: config.mcpServers ?? {},
    approval: { require: config.approval?.require ?? [], allow: config.approval?.allow ?? [] },
    elicitation: config.elicitation ?? "ask",
  };
  if (config.azure) settings.azure = config.azure;
  if (config.serve) settings.serve = config.serve;
  if (config.prices) settings.prices = config.prices;
  if (config.agents && Object.keys(config.agents).length > 0) settings.agents = config.agents;
  if (config.maxDepth !== undefined) settings.maxDepth = config.maxDepth;

  const baseUrl = first([
    ["--base-url", flags.baseUrl],
    [`${prefix}_BASE_URL`, nonEmpty(env[`${prefix}_BASE_URL`])],
    [fromConfig("baseUrl"), config.baseUrl],
  ]);
  if (baseUrl) settings.baseUrl = checkBaseUrl(baseUrl[1], baseUrl[0]);
  const apiKey = nonEmpty(env[`${prefix}_API_KEY`]);
  if (apiKey !== undefined) settings.apiKey = apiKey;
  const timeout = flags.timeout ?? config.timeout;
  if (timeout !== undefined) settings.timeoutMs = Math.max(1, Math.ceil(timeout * 1000));
  const maxContextTokens = flags.maxContextTokens ?? config.maxContextTokens;
  if (maxContextTokens !== undefined) settings.maxContextTokens = maxContextTokens;
  const tokenBudget = flags.tokenBudget ?? config.tokenBudget;
  if (tokenBudget !== undefined) settings.tokenBudget = tokenBudget;
  const costBudget = flags.costBudget ?? config.costBudget;
  if (costBudget !== undefined) settings.costBudget = costBudget;
  if (flags.compact === true || config.compaction !== undefined)
    settings.compaction = { ...config.compaction };
  return settings;
}

/** Where the session store is: `AGENTLOOP_DB` > config "db" > the default, with where that came from. */
export function dbSetting(env: Env, config: ConfigFile, configName = "agentloop.json"): Settings["db"] {
  const db = first([
    ["AGENTLOOP_DB", nonEmpty(env.AGENTLOOP_DB)],
    [`"db" in ${configName}`, config.db],
  ]);
  return db ? { location: db[1], from: db[0] } : { location: DEFAULT_DB, from: "the default" };
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value.trim() === "" ? undefined : value;
}

type Source<T> = readonly [source: string, value: T | undefined];

/** The first value given, with where it came from. */
function first<T>(sources: readonly Source<T>[]): readonly [string, T] | undefined {
  const found = sources.find(([, value]) => value !== undefined);
  return found as readonly [string, T] | undefined;
}

function pick<T extends string>(
  name: string,
  sources: readonly Source<string>[],
  allowed: readonly T[],
): T | undefined {
  const found = first(sources);
  if (!found) return undefined;
  const [source, value] = found;
  if ((allowed as readonly string[]).includes(value)) return value as T;
  const choices = new Intl.ListFormat("en", { type: "disjunction" }).format(allowed);
  throw new AgentloopError("config", `Invalid ${name} '${value}' (${source}): use ${choices}.`);
}

/** A base URL must be absolute http(s); `localhost:11434/v1` is not (it parses as scheme "localhost:"). */
function checkBaseUrl(value: string, source: string): string {
  if (isHttpUrl(value)) return value;
  const guess = /^[\w.-]+:\d+(\/|$)/.test(value) ? `http://${value}` : "http://localhost:11434/v1";
  throw new AgentloopError(
    "config",
    `Invalid base URL '${value}' (${source}): give the full http:// or https:// form, e.g. ${guess}.`,
  );
}
