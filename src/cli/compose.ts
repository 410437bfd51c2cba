import { Agent, type AgentOptions, type AnyAgent } from "../agent/agent.js";
import type { Budget } from "../agent/prompt.js";
import { AgentloopError } from "../core/errors.js";
import { configSecrets } from "../mcp/config.js";
import type { ElicitationHandler } from "../mcp/elicitation.js";
import type { McpPromptInfo } from "../mcp/index.js";
import type { Model } from "../models/adapter.js";
import { resolvePrice } from "../models/pricing.js";
import { type Recorder, recorder } from "../record/recorder.js";
import type { OpenReplay } from "../record/replay.js";
import { builtinTools } from "../tools/builtin/index.js";
import { loopBreakingTools } from "../tools/builtin/loop-breaking.js";
import type { Tool } from "../tools/tool.js";
import { approvalRules } from "./approval.js";
import type { CliFlags, Settings } from "./config.js";
import { loadConfigFile, resolveSettings } from "./config.js";
import { readOutputSchema } from "./inputs.js";
import { subAgentModels, subAgents } from "./sub-agents.js";

/**
 * The CLI's composition root: what a command builds from its settings (flags, environment, config
 * file): the model, the tools (built-ins and the MCP servers'), the agent. `run`, `chat`, `serve`
 * and `tools` start here.
 */

/** Builds the settings of a command from its flags, the environment and the config file. */
export async function settingsFrom(flags: CliFlags): Promise<Settings> {
  const { config, name, notes } = await loadConfigFile(flags.config);
  for (const note of notes) process.stderr.write(`agentloop: note: ${note}\n`);
  const settings: Settings = { ...resolveSettings(flags, process.env, config, name), configFile: name };
  if (flags.outputSchema !== undefined) settings.outputSchema = readOutputSchema(flags.outputSchema);
  return settings;
}

/** The model of the settings; each provider's SDK is loaded only when it is used. */
async function createModel(settings: Settings): Promise<Model> {
  const { provider, model, apiKey, baseUrl } = settings;
  const keyVar = provider === "anthropic" ? "ANTHROPIC_API_KEY" : "OPENAI_API_KEY";
  if (!apiKey && !baseUrl) {
    const server =
      provider === "anthropic"
        ? "an Anthropic-compatible endpoint"
        : "an OpenAI-compatible server such as Ollama";
    throw new AgentloopError(
      "config",
      `No API key: set ${keyVar}, or point --base-url (or ${provider === "anthropic" ? "ANTHROPIC" : "OPENAI"}_BASE_URL) at ${server} ('agentloop demo' runs without either).`,
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
  if (provider === "openai-responses") {
    if (settings.azure) {
      throw new AgentloopError(
        "config",
        `"azure" in ${settings.configFile ?? "agentloop.json"} is for provider openai (Chat Completions deployments): drop it to use provider openai-responses, whose endpoint is "baseUrl" (e.g. https://<resource>.openai.azure.com/openai/v1).`,
      );
    }
    const { openAIResponsesModel } = await import("../models/openai-responses.js");
    return openAIResponsesModel(common);
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

function createAgent(
  settings: Settings,
  model: Model,
  tools: readonly Tool[] | (() => readonly Tool[]) = localTools(settings),
  onApproval?: AgentOptions["onApproval"],
  summaries?: Model,
  models?: ReadonlyMap<string, Model>,
  record?: Recorder,
): AnyAgent {
  const price = settings.costBudget === undefined ? undefined : resolvePrice(model, settings.prices);
  if (settings.costBudget !== undefined && !price) {
    throw new AgentloopError(
      "config",
      `A cost budget needs the price of model '${model.id}': add "prices": {"${model.id}": {"input": 0.15, "output": 0.6}} (USD per million tokens) to ${settings.configFile ?? "agentloop.json"}, or drop --cost-budget.`,
    );
  }
  if (price && price.input === 0 && price.output === 0 && !price.cachedInput) {
    // A model at a local URL is free unless priced: the budget would never be spent.
    process.stderr.write(
      `agentloop: warning: the cost budget (--cost-budget) has no effect: model '${model.id}' costs nothing (a local server, or priced 0); limit the run with --token-budget, or give the model a price in "prices"\n`,
    );
  }
  const ruled = approvalRules(settings.approval);
  const secrets = mcpSecrets(settings);
  // Each run compacts its own history, a sub-agent's too (SPEC section 13).
  const compaction = settings.compaction && {
    compaction: {
      ...(settings.compaction.at !== undefined && { at: settings.compaction.at }),
      ...(summaries && { model: summaries }),
    },
  };
  const common = {
    secrets,
    ...compaction,
    ...(record && { record }),
    ...(settings.prices && { prices: settings.prices }),
    ...(settings.maxContextTokens !== undefined && { maxContextTokens: settings.maxContextTokens }),
  };
  const catalogue = () => ruled(typeof tools === "function" ? tools() : tools);
  const agents = models && subAgents(settings, models, catalogue, common);
  return new Agent({
    ...(settings.outputSchema && { outputSchema: settings.outputSchema }),
    model,
    instructions: settings.instructions,
    tools: typeof tools === "function" ? () => ruled(tools()) : ruled(tools),
    ...(onApproval && { onApproval }),
    maxIterations: settings.maxIterations,
    mode: settings.mode,
    toolProtocol: settings.toolProtocol,
    budget: budgetOf(settings),
    ...(settings.prices && { prices: settings.prices }),
    ...(settings.maxContextTokens !== undefined && { maxContextTokens: settings.maxContextTokens }),
    secrets,
    ...compaction,
    ...(record && { record }),
    ...(agents && { agents }),
    ...(settings.maxDepth !== undefined && { maxDepth: settings.maxDepth }),
  });
}

/** The recording of `--replay`, checked against the configured provider; its mismatches on stderr. */
async function openCliReplay(flags: CliFlags, settings: Settings): Promise<OpenReplay> {
  const file = flags.replay as string;
  const { openReplay } = await import("../record/replay.js");
  const replay = openReplay(file, {
    lenient: flags.replayLenient === true,
    onMismatch: (diff) => process.stderr.write(`agentloop: replay: ${diff}\n`),
  });
  const recorded = replay.recording.header.provider;
  if (recorded !== settings.provider) {
    throw new AgentloopError(
      "config",
      `${file} was recorded with provider ${recorded}, but the provider configured is ${settings.provider}: pass --provider ${recorded} to replay it.`,
    );
  }
  return replay;
}

/** `--replay-tools`: the recording's tools, and no MCP server started. */
function replayedTools(tools: Tool[]): LoadedTools {
  return {
    tools: () => tools,
    sources: () => tools.map(() => "recording"),
    prompts: () => [],
    getPrompt: async (name) => {
      throw new AgentloopError(
        "usage",
        `No MCP prompt '${name}': a replay with --replay-tools starts no MCP server.`,
      );
    },
    close: async () => {},
  };
}

/** The secrets of the configured MCP servers (their headers, secret env values, OAuth client secrets). */
export function mcpSecrets(settings: Settings): string[] {
  return Object.values(settings.mcpServers).flatMap(configSecrets);
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
  /** The MCP servers' prompts (`/name` in chat). */
  prompts(): McpPromptInfo[];
  /** Renders an MCP prompt: its messages as the text of one user message. */
  getPrompt(name: string, args: Record<string, string>): Promise<string>;
  /** Closes the MCP servers (and their child processes). Never rejects. */
  close(): Promise<void>;
}

/**
 * Starts the configured MCP servers (in parallel) and gathers the tools. Warnings go to stderr
 * (server logs too with `verbose`). `onElicitation` answers the servers' requests for input
 * (default: declined); `signal` gives up the start (rejects with `AgentloopError("aborted")`).
 */
export async function loadTools(
  settings: Settings,
  options: {
    verbose?: boolean;
    onElicitation?: ElicitationHandler;
    signal?: AbortSignal;
    /**
     * Print the notes about single tools of the catalogue (skipped, renamed, arguments not
     * checked locally): the same at every start, so only where the catalogue is the point
     * (`tools`, the log of `serve`) or with `verbose`. Default true.
     */
    catalogueNotes?: boolean;
  } = {},
): Promise<LoadedTools> {
  const { verbose, onElicitation, signal } = options;
  const notes = options.catalogueNotes !== false || verbose === true;
  const local = localTools(settings);
  const sources = local.map(() => "local");
  if (Object.keys(settings.mcpServers).length === 0) {
    return {
      tools: () => local,
      sources: () => sources,
      prompts: () => [],
      getPrompt: async (name) => {
        throw new AgentloopError("mcp_prompt", `No MCP prompt is named '${name}'.`);
      },
      close: async () => {},
    };
  }
  const reserved = [...local, ...(settings.mode === "explicit" ? loopBreakingTools() : [])].map(
    (t) => t.name,
  );
  const [{ connectMcpServers }, { mcpResultToText }] = await Promise.all([
    import("../mcp/index.js"),
    import("../mcp/result.js"),
  ]);
  // A person at the terminal can sign in to a server that asks; otherwise stored tokens only.
  const { browserSignIn } = await import("./mcp-login.js");
  const mcp = await connectMcpServers(settings.mcpServers, {
    ...(process.stderr.isTTY === true && { oauth: { openUrl: browserSignIn } }),
    reservedNames: reserved,
    ...(onElicitation && { onElicitation }),
    ...(signal && { signal }),
    ...(settings.configFile !== undefined && { configFile: settings.configFile }),
    onWarning: (message) => {
      if (notes || !CATALOGUE_NOTE.test(message)) process.stderr.write(`agentloop: warning: ${message}\n`);
    },
    ...(verbose && {
      onServerLog: (server: string, line: string) => process.stderr.write(`[${server}] ${line}\n`),
    }),
  });
  return {
    tools: () => [...local, ...mcp.tools()],
    sources: () => [...sources, ...mcp.sources().map((s) => `mcp:${s.server}`)],
    prompts: () => mcp.prompts(),
    getPrompt: async (name, args) => {
      const { messages } = await mcp.getPrompt(name, args);
      return messages.map((message) => mcpResultToText({ content: [message.content] })).join("\n\n");
    },
    close: () => mcp.close(),
  };
}

/** How the MCP client words its notes about one tool of the catalogue (mcp/client.ts, mcp/names.ts, mcp/connection.ts). */
const CATALOGUE_NOTE = /^MCP tool '.*' of server '[^']*'/;

/** A ready agent for a command, with what must be closed when the command ends. */
export async function setupAgent(
  flags: CliFlags,
  options: {
    settings?: Settings;
    onApproval?: AgentOptions["onApproval"];
    onElicitation?: ElicitationHandler;
    /** Gives up starting the MCP servers (Ctrl+C), a sign-in in the browser included. */
    signal?: AbortSignal;
    /** See `loadTools`. Default true. */
    catalogueNotes?: boolean;
  } = {},
): Promise<{ settings: Settings; agent: AnyAgent; loaded: LoadedTools; close(): Promise<void> }> {
  const settings = options.settings ?? (await settingsFrom(flags));
  // `--record`: the file is made now, so one that cannot be written says so before anything runs.
  const record =
    flags.record === undefined ? undefined : recorder(flags.record, { secrets: mcpSecrets(settings) });
  // `--replay`: every model (sub-agents' too) answers from the recording, in order.
  const replay = flags.replay === undefined ? undefined : await openCliReplay(flags, settings);
  const make = replay ? async (s: Settings) => replay.model(s.provider, s.model) : createModel;
  const model = replay
    ? replay.model(settings.provider, flags.model ?? replay.recording.header.model)
    : await createModel(settings);
  // `compaction.model`: another model of the same provider writes the summaries.
  const other = settings.compaction?.model;
  const summaries = other && other !== model.id ? await make({ ...settings, model: other }) : undefined;
  const models = settings.agents && (await subAgentModels(settings, model, make));
  const { onElicitation, signal } = options;
  const loaded =
    replay && flags.replayTools
      ? replayedTools(replay.tools())
      : await loadTools(settings, {
          verbose: flags.verbose === true,
          ...(options.catalogueNotes !== undefined && { catalogueNotes: options.catalogueNotes }),
          ...(onElicitation && { onElicitation }),
          ...(signal && { signal }),
        });
  try {
    return {
      settings,
      agent: createAgent(settings, model, loaded.tools, options.onApproval, summaries, models, record),
      loaded,
      close: loaded.close,
    };
  } catch (error) {
    await loaded.close();
    throw error;
  }
}
