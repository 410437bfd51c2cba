/**
 * Replaying a recording (SPEC section 12): models that answer from it through the adapters' own
 * SDK parsing, and tools that answer from it, matched by name and arguments.
 */
import { isDeepStrictEqual } from "node:util";
import { AgentloopError } from "../core/errors.js";
import type { Model } from "../models/adapter.js";
import { FREE, isLocalURL } from "../models/pricing.js";
import { defineTool, type Tool } from "../tools/tool.js";
import { Replay, type ReplayOptions } from "./http.js";
import { type RecordedProvider, type Recording, readRecording, type ToolEntry } from "./recording.js";

const BASE_URL = "http://replay.invalid/v1";

/** The tools the agent adds itself: never replayed from a recording's definitions. */
const OWN_TOOLS = new Set(["task_completion", "ask_question", "converse", "final_output", "delegate_task"]);

/** A recording opened for replay: models of any provider and id that share its order, and its tools. */
export interface OpenReplay {
  readonly recording: Recording;
  /** A model answering from the recording (the header's provider and model unless named). */
  model(provider?: RecordedProvider, id?: string): Model;
  /** The recorded tools, answering each call from the recording (by name and arguments). */
  tools(): Tool[];
}

export function openReplay(file: string, options: ReplayOptions = {}): OpenReplay {
  const recording = readRecording(file);
  const replay = new Replay(recording, options);
  const first = recording.models[0]?.request;
  const stream = first?.stream !== false;
  return {
    recording,
    model(provider = recording.header.provider, id = recording.header.model) {
      // The recorded base URL (no request leaves: the fetch answers): the same price and traces.
      const baseURL = recording.header.baseURL ?? BASE_URL;
      const options = { model: id, apiKey: "sk-replay", fetch: replay.fetch, maxRetries: 0, baseURL, stream };
      return lazyModel(provider, options);
    },
    tools: () => replayedTools(recording),
  };
}

/**
 * The adapter of `provider` made on the first call (importing `agentloop-runtime/testing` loads no
 * SDK): the same model the live run had, its HTTP answered by the replay's fetch.
 */
function lazyModel(
  provider: RecordedProvider,
  options: {
    model: string;
    apiKey: string;
    fetch: typeof fetch;
    maxRetries: number;
    baseURL: string;
    stream: boolean;
  },
): Model {
  let made: Promise<Model> | undefined;
  const load = async (): Promise<Model> => {
    if (provider === "anthropic") {
      const { stream: _, ...rest } = options;
      return (await import("../models/anthropic.js")).anthropicModel(rest);
    }
    if (provider === "openai-responses")
      return (await import("../models/openai-responses.js")).openAIResponsesModel(options);
    return (await import("../models/openai-chat.js")).openAIChatModel(options);
  };
  return {
    id: options.model,
    ...(isLocalURL(options.baseURL) && { price: FREE }),
    structuredOutput: true,
    provider: provider === "anthropic" ? "anthropic" : "openai",
    baseURL: options.baseURL,
    async *stream(request, streamOptions) {
      made ??= load();
      yield* (await made).stream(request, streamOptions);
    },
  };
}

/**
 * A `Model` that replays the recording in `file`: each request is answered with the recorded
 * response, in order, through the same adapter code as the live run; a request that differs ends
 * the call with the `model_error` code `replay_mismatch` (unless `lenient`).
 * @throws AgentloopError("invalid_option") for a file that is not a readable recording.
 */
export function replayModel(file: string, options: ReplayOptions = {}): Model {
  return openReplay(file, options).model();
}

/**
 * The tools of the recording in `file` (their definitions as the model was given them), each call
 * answered with the recorded result of a call of the same name and arguments, each recorded result
 * used once: with `replayModel`, a run that needs no live tool (or MCP server) at all.
 */
export function replayTools(file: string): Tool[] {
  return replayedTools(readRecording(file));
}

interface Definition {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
}

/** The tool definitions of a recorded request, in the provider's shape. */
function definitionsOf(request: Record<string, unknown> | undefined): Definition[] {
  const tools = Array.isArray(request?.tools) ? (request.tools as Record<string, unknown>[]) : [];
  const out: Definition[] = [];
  for (const tool of tools) {
    const fn = (tool.function as Record<string, unknown> | undefined) ?? tool;
    const name = fn.name;
    if (typeof name !== "string") continue;
    const parameters = (fn.parameters ?? fn.input_schema ?? { type: "object" }) as Record<string, unknown>;
    out.push({ name, description: typeof fn.description === "string" ? fn.description : "", parameters });
  }
  return out;
}

function replayedTools(recording: Recording): Tool[] {
  const unused: ToolEntry[] = [...recording.tools];
  const seen = new Set<string>();
  const tools: Tool[] = [];
  for (const entry of recording.models) {
    for (const d of definitionsOf(entry.request)) {
      if (seen.has(d.name) || OWN_TOOLS.has(d.name)) continue;
      seen.add(d.name);
      tools.push(
        defineTool({
          name: d.name,
          description: d.description,
          parameters: d.parameters,
          execute: (args: unknown) => {
            const i = unused.findIndex((t) => t.name === d.name && isDeepStrictEqual(t.arguments, args));
            if (i < 0) {
              throw new Error(
                `No recorded result for ${d.name}(${JSON.stringify(args)}): the recording has no call of ${d.name} with these arguments left.`,
              );
            }
            const [found] = unused.splice(i, 1) as [ToolEntry];
            if (found.isError) throw new Error(found.content);
            return found.content;
          },
        }),
      );
    }
  }
  return tools;
}

/**
 * The task of a recording's first model request: its last user message's text (what `run
 * --replay` asks when no prompt is given).
 * @throws AgentloopError("invalid_option") for a file that is not a readable recording, or one with no prompt.
 */
export function recordedPrompt(file: string): string {
  const request = readRecording(file).models[0]?.request;
  const list = (request?.messages ?? request?.input) as unknown;
  const text = typeof list === "string" ? list : Array.isArray(list) ? lastUserText(list) : undefined;
  if (text === undefined) {
    throw new AgentloopError(
      "invalid_option",
      `${file} holds no prompt to replay: give the prompt after --replay <file>.`,
    );
  }
  return text;
}

function lastUserText(messages: unknown[]): string | undefined {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i] as { role?: unknown; content?: unknown };
    if (m?.role !== "user") continue;
    if (typeof m.content === "string") return m.content;
    if (Array.isArray(m.content)) {
      const texts = (m.content as { type?: unknown; text?: unknown }[])
        .filter(
          (part) => (part.type === "text" || part.type === "input_text") && typeof part.text === "string",
        )
        .map((part) => part.text as string);
      if (texts.length > 0) return texts.join("\n");
    }
  }
  return undefined;
}
