import { Agent } from "../core/agent.js";
import { AgentloopError } from "../core/errors.js";
import type { Budget } from "../core/prompt.js";
import type { Model } from "../models/adapter.js";
import { anthropicModel } from "../models/anthropic.js";
import { openAIChatModel } from "../models/openai-chat.js";
import { builtinTools } from "../tools/builtin/index.js";
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
  return resolveSettings(flags, process.env, config);
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
  return provider === "anthropic" ? anthropicModel(common) : openAIChatModel(common);
}

function budgetOf(settings: Settings): Budget {
  return {
    ...(settings.tokenBudget !== undefined && { maxTokens: settings.tokenBudget }),
    ...(settings.costBudget !== undefined && { maxCostUsd: settings.costBudget }),
    ...(settings.timeoutMs !== undefined && { timeoutMs: settings.timeoutMs }),
  };
}

export function createAgent(settings: Settings, model: Model): Agent {
  const tools: Tool[] = settings.builtinTools ? builtinTools() : [];
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

/** `agentloop run`: one task; the answer on stdout, progress on stderr. Resolves to the exit code. */
export async function runCommand(prompt: string, flags: CliFlags): Promise<number> {
  const settings = settingsFrom(flags);
  const agent = createAgent(settings, createModel(settings));

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
  }
}

/** Writes to stdout, waiting for a full pipe to drain. */
function writeOut(text: string): Promise<void> {
  return new Promise((resolve) => {
    if (process.stdout.write(text)) resolve();
    else process.stdout.once("drain", resolve);
  });
}
