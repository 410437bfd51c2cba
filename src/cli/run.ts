import { Agent } from "../agent/agent.js";
import type { Budget } from "../agent/prompt.js";
import { AgentloopError } from "../core/errors.js";
import type { Model } from "../models/adapter.js";
import { resolvePrice } from "../models/pricing.js";
import { builtinTools } from "../tools/builtin/index.js";
import { loopBreakingTools } from "../tools/builtin/loop-breaking.js";
import type { Tool } from "../tools/tool.js";
import type { CliFlags, Settings } from "./config.js";
import { loadConfigFile, resolveSettings } from "./config.js";
import { EXIT_CODES, progressRenderer, stopLine } from "./render.js";

/** Builds the settings of a command from its flags, the environment and the config file. */
export async function settingsFrom(flags: CliFlags): Promise<Settings> {
  if (flags.session !== undefined) {
    throw new AgentloopError("config", "--session is not available yet: sessions come in a later release.");
  }
  const { config, name, notes } = await loadConfigFile(flags.config);
  for (const note of notes) process.stderr.write(`agentloop: note: ${note}\n`);
  return { ...resolveSettings(flags, process.env, config, name), configFile: name };
}

/** The model of the settings; each provider's SDK is loaded only when it is used. */
export async function createModel(settings: Settings): Promise<Model> {
  const { provider, model, apiKey, baseUrl } = settings;
  const keyVar = provider === "anthropic" ? "ANTHROPIC_API_KEY" : "OPENAI_API_KEY";
  if (!apiKey && !baseUrl) {
    const server =
      provider === "anthropic"
        ? "an Anthropic-compatible endpoint"
        : "an OpenAI-compatible server such as Ollama";
    throw new AgentloopError(
      "config",
      `No API key: set ${keyVar}, or point --base-url (or ${provider === "anthropic" ? "ANTHROPIC" : "OPENAI"}_BASE_URL) at ${server}.`,
    );
  }
  const common = {
    model,
    ...(apiKey !== undefined && { apiKey }),
    ...(baseUrl !== undefined && { baseURL: baseUrl }),
  };
  if (provider === "anthropic") {
    const { anthropicModel } = await import("../models/anthropic.js");
    return anthropicModel(common);
  }
  const { openAIChatModel } = await import("../models/openai-chat.js");
  return openAIChatModel({ ...common, ...(settings.azure && { azure: settings.azure }) });
}

function budgetOf(settings: Settings): Budget {
  return {
    ...(settings.tokenBudget !== undefined && { maxTokens: settings.tokenBudget }),
    ...(settings.costBudget !== undefined && { maxCostUsd: settings.costBudget }),
    ...(settings.timeoutMs !== undefined && { timeoutMs: settings.timeoutMs }),
  };
}

export function createAgent(
  settings: Settings,
  model: Model,
  tools: readonly Tool[] | (() => readonly Tool[]) = localTools(settings),
): Agent {
  if (settings.costBudget !== undefined && !resolvePrice(model, settings.prices)) {
    throw new AgentloopError(
      "config",
      `A cost budget needs the price of model '${model.id}': add "prices": {"${model.id}": {"input": 0.15, "output": 0.6}} (USD per million tokens) to ${settings.configFile ?? "agentloop.json"}, or drop --cost-budget.`,
    );
  }
  return new Agent({
    model,
    instructions: settings.instructions,
    tools,
    maxIterations: settings.maxIterations,
    mode: settings.mode,
    toolProtocol: settings.toolProtocol,
    budget: budgetOf(settings),
    ...(settings.prices && { prices: settings.prices }),
    ...(settings.maxContextTokens !== undefined && { maxContextTokens: settings.maxContextTokens }),
  });
}

function localTools(settings: Settings): Tool[] {
  return settings.builtinTools ? builtinTools() : [];
}

/** Every tool of a command: built-ins, then each MCP server's, with where each comes from. */
export interface LoadedTools {
  /** The current catalogue: MCP servers may change theirs (`tools/list_changed`). */
  tools(): Tool[];
  /** Where each tool of `tools()` comes from: "local" or "mcp:<server>". */
  sources(): string[];
  /** Closes the MCP servers (and their child processes). Never rejects. */
  close(): Promise<void>;
}

/** Starts the configured MCP servers (in parallel) and gathers the tools. Warnings go to stderr. */
export async function loadTools(settings: Settings, verbose = false): Promise<LoadedTools> {
  const local = localTools(settings);
  const sources = local.map(() => "local");
  if (Object.keys(settings.mcpServers).length === 0) {
    return { tools: () => local, sources: () => sources, close: async () => {} };
  }
  const reserved = [...local, ...(settings.mode === "explicit" ? loopBreakingTools() : [])].map(
    (t) => t.name,
  );
  const { connectMcpServers } = await import("../mcp/index.js");
  const mcp = await connectMcpServers(settings.mcpServers, {
    reservedNames: reserved,
    ...(settings.configFile !== undefined && { configFile: settings.configFile }),
    onWarning: (message) => process.stderr.write(`agentloop: warning: ${message}\n`),
    ...(verbose && {
      onServerLog: (server: string, line: string) => process.stderr.write(`[${server}] ${line}\n`),
    }),
  });
  return {
    tools: () => [...local, ...mcp.tools()],
    sources: () => [...sources, ...mcp.sources().map((s) => `mcp:${s.server}`)],
    close: () => mcp.close(),
  };
}

/** A ready agent for a command, with what must be closed when the command ends. */
export async function setupAgent(
  flags: CliFlags,
): Promise<{ settings: Settings; agent: Agent; close(): Promise<void> }> {
  const settings = await settingsFrom(flags);
  const model = await createModel(settings);
  const loaded = await loadTools(settings, flags.verbose === true);
  try {
    return { settings, agent: createAgent(settings, model, loaded.tools), close: loaded.close };
  } catch (error) {
    await loaded.close();
    throw error;
  }
}

/** Signals that stop a run like Ctrl+C: the run is aborted, its last event printed, its MCP servers closed. */
export const STOP_SIGNALS = ["SIGINT", "SIGTERM", "SIGHUP"] as const;

/** `agentloop run`: one task; the answer on stdout, progress on stderr. Resolves to the exit code. */
export async function runCommand(prompt: string, flags: CliFlags): Promise<number> {
  // Listening from the start: a signal during MCP startup still ends in one `aborted` turn_complete.
  const controller = new AbortController();
  const onSignal = () => {
    // A second signal stops at once; the MCP children are ended on exit (mcp/children.ts).
    if (controller.signal.aborted) process.exit(EXIT_CODES.aborted);
    controller.abort();
  };
  for (const signal of STOP_SIGNALS) process.on(signal, onSignal);
  try {
    const { agent, close } = await setupAgent(flags);
    try {
      return await runTurn(agent, prompt, flags, controller.signal);
    } finally {
      await close();
    }
  } finally {
    for (const signal of STOP_SIGNALS) process.off(signal, onSignal);
  }
}

async function runTurn(agent: Agent, prompt: string, flags: CliFlags, signal: AbortSignal): Promise<number> {
  const showProgress = flags.verbose === true || (process.stderr.isTTY === true && !flags.json);
  const progress = showProgress
    ? progressRenderer((line) => process.stderr.write(`${line}\n`), process.stderr.isTTY === true)
    : undefined;
  const run = agent.stream(prompt, { signal });
  for await (const event of run) {
    if (flags.json) await writeOut(`${JSON.stringify(event)}\n`);
    progress?.(event);
  }
  const result = await run.result;
  if (!flags.json) {
    if (result.output !== "" || result.stopReason === "final_answer") await writeOut(`${result.output}\n`);
    const line = stopLine(result.stopReason, result.iterations, result.error);
    if (line) process.stderr.write(`${line}\n`);
  }
  return EXIT_CODES[result.stopReason];
}

/** Writes to stdout, waiting for a full pipe to drain. */
function writeOut(text: string): Promise<void> {
  return new Promise((resolve) => {
    if (process.stdout.write(text)) resolve();
    else process.stdout.once("drain", resolve);
  });
}
