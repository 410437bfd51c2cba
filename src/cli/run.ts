import { Agent } from "../core/agent.js";
import { AgentloopError } from "../core/errors.js";
import type { Budget } from "../core/prompt.js";
import { connectMcpServers } from "../mcp/index.js";
import type { Model } from "../models/adapter.js";
import { anthropicModel } from "../models/anthropic.js";
import { openAIChatModel } from "../models/openai-chat.js";
import { builtinTools } from "../tools/builtin/index.js";
import { loopBreakingTools } from "../tools/builtin/loop-breaking.js";
import type { Tool } from "../tools/tool.js";
import type { CliFlags, Settings } from "./config.js";
import { loadConfigFile, resolveSettings } from "./config.js";
import { EXIT_CODES, progressRenderer, stopLine } from "./render.js";

/** Builds the settings of a command from its flags, the environment and the config file. */
export function settingsFrom(flags: CliFlags): Settings {
  if (flags.session !== undefined) {
    throw new AgentloopError("config", "--session is not available yet: sessions come in a later release.");
  }
  const { config } = loadConfigFile(flags.config);
  return { ...resolveSettings(flags, process.env, config), configFile: flags.config ?? "agentloop.json" };
}

export function createModel(settings: Settings): Model {
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
  if (provider === "anthropic") return anthropicModel(common);
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
  return new Agent({
    model,
    instructions: settings.instructions,
    tools,
    maxIterations: settings.maxIterations,
    mode: settings.mode,
    toolProtocol: settings.toolProtocol,
    budget: budgetOf(settings),
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
  const settings = settingsFrom(flags);
  const model = createModel(settings);
  const loaded = await loadTools(settings, flags.verbose === true);
  try {
    return { settings, agent: createAgent(settings, model, loaded.tools), close: loaded.close };
  } catch (error) {
    await loaded.close();
    throw error;
  }
}

/** `agentloop run`: one task; the answer on stdout, progress on stderr. Resolves to the exit code. */
export async function runCommand(prompt: string, flags: CliFlags): Promise<number> {
  const { agent, close } = await setupAgent(flags);

  const controller = new AbortController();
  let interrupts = 0;
  const onSigint = () => {
    interrupts++;
    if (interrupts > 1) process.exit(EXIT_CODES.aborted);
    controller.abort();
  };
  process.on("SIGINT", onSigint);

  const showProgress = flags.verbose === true || (process.stderr.isTTY === true && !flags.json);
  const progress = showProgress
    ? progressRenderer((line) => process.stderr.write(`${line}\n`), process.stderr.isTTY === true)
    : undefined;

  try {
    const events = agent.stream(prompt, { signal: controller.signal });
    while (true) {
      const next = await events.next();
      if (next.done) {
        const result = next.value;
        if (!flags.json) {
          if (result.output !== "" || result.stopReason === "final_answer")
            await writeOut(`${result.output}\n`);
          const line = stopLine(result.stopReason, result.iterations, result.error);
          if (line) process.stderr.write(`${line}\n`);
        }
        return EXIT_CODES[result.stopReason];
      }
      if (flags.json) await writeOut(`${JSON.stringify(next.value)}\n`);
      progress?.(next.value);
    }
  } finally {
    process.off("SIGINT", onSigint);
    await close();
  }
}

/** Writes to stdout, waiting for a full pipe to drain. */
function writeOut(text: string): Promise<void> {
  return new Promise((resolve) => {
    if (process.stdout.write(text)) resolve();
    else process.stdout.once("drain", resolve);
  });
}
