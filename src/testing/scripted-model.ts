import type { Usage } from "../core/messages.js";
import type { Model, ModelError, ModelEvent, ModelRequest } from "../models/adapter.js";

/** One scripted reply. Text and thinking are streamed in small deltas, like a real provider. */
export interface ScriptedReply {
  text?: string;
  thinking?: string;
  /** `arguments` may be an object (serialised for you) or raw text, e.g. deliberately invalid JSON. */
  toolCalls?: { id?: string; name: string; arguments?: Record<string, unknown> | string }[];
  usage?: Partial<Usage>;
  finishReason?: string;
}

/** A scripted failure: the model call ends with this error (e.g. `{ error: { code: "http_500", message } }`). */
export interface ScriptedError {
  error: ModelError;
}

export type ScriptedStep = ScriptedReply | ScriptedError;

export type ScriptedResponder = (
  request: ModelRequest,
  callIndex: number,
) => ScriptedStep | Promise<ScriptedStep>;

export interface ScriptedModelOptions {
  id?: string;
  /** Characters per streamed delta. Default 8. */
  chunkSize?: number;
  /**
   * Steps of a list script may be left unused. By default they may not: a test that ends with
   * steps its run never asked for fails (this repository's tests check `takeUnusedScripts`
   * after each test), as openai-agents-js's fake model does, so a script says exactly what
   * the run does.
   */
  allowUnused?: boolean;
}

/** List scripts with steps not yet used (models made with `allowUnused` are not listed). */
const unfinished = new Set<{ describe(): string | undefined }>();

/**
 * What list scripts made since the last call still have unused steps, one line each (empty when
 * none), and forgets them all: a test runner calls it after each test and fails the test for any.
 */
export function takeUnusedScripts(): string[] {
  const lines: string[] = [];
  for (const script of unfinished) {
    const line = script.describe();
    if (line) lines.push(line);
  }
  unfinished.clear();
  return lines;
}

/** A deterministic model for tests: replies from a list or a function, and a record of every request. */
export interface ScriptedModel extends Model {
  /** Every request received, in order (a snapshot of the messages at call time). */
  readonly requests: ModelRequest[];
  /** Steps not yet used (list scripts only). */
  readonly remaining: number;
}

/**
 * A model that replies from a script. With a list, the n-th call gets the n-th step, a call past
 * the end fails the run with code "script_exhausted", and steps left unused fail the test (see
 * `allowUnused`); with a function, the function decides. Honours the abort signal between deltas.
 */
export function scriptedModel(
  script: readonly ScriptedStep[] | ScriptedResponder,
  options: ScriptedModelOptions = {},
): ScriptedModel {
  const requests: ModelRequest[] = [];
  const chunkSize = Math.max(1, options.chunkSize ?? 8);
  let nextIndex = 0;
  const id = options.id ?? "scripted";
  const watch =
    typeof script !== "function" && script.length > 0 && options.allowUnused !== true
      ? {
          describe: () =>
            nextIndex < script.length
              ? `scripted model '${id}': ${script.length - nextIndex} of ${script.length} steps were never used (the run ended before them): remove them, or pass { allowUnused: true }.`
              : undefined,
        }
      : undefined;
  if (watch) unfinished.add(watch);
  return {
    id,
    requests,
    get remaining() {
      return typeof script === "function" ? 0 : Math.max(0, script.length - nextIndex);
    },
    async *stream(
      request: ModelRequest,
      { signal }: { signal?: AbortSignal } = {},
    ): AsyncGenerator<ModelEvent> {
      const callIndex = nextIndex++;
      if (watch && nextIndex >= script.length) unfinished.delete(watch);
      // History is append-only within a run: remember its length and slice on read, so recording stays O(1).
      const { messages } = request;
      const length = messages.length;
      requests.push({
        system: request.system,
        tools: request.tools,
        get messages() {
          return messages.slice(0, length);
        },
        ...(request.toolChoice !== undefined && { toolChoice: request.toolChoice }),
        ...(request.parallelToolCalls !== undefined && { parallelToolCalls: request.parallelToolCalls }),
      });
      let step: ScriptedStep | undefined;
      try {
        step = typeof script === "function" ? await script(request, callIndex) : script[callIndex];
      } catch (error) {
        yield { type: "error", error: { code: "script_error", message: `scripted model: ${String(error)}` } };
        return;
      }
      if (!step) {
        const message = `scripted model: no reply scripted for call ${callIndex + 1} (the script has ${callIndex}).`;
        yield { type: "error", error: { code: "script_exhausted", message } };
        return;
      }
      if ("error" in step) {
        yield { type: "error", error: step.error };
        return;
      }
      const aborted = (): ModelEvent => ({
        type: "error",
        error: { code: "aborted", message: "The model call was aborted." },
      });
      for (const [kind, text] of [
        ["thinking_delta", step.thinking],
        ["text_delta", step.text],
      ] as const) {
        for (let i = 0; text && i < text.length; i += chunkSize) {
          if (signal?.aborted) return yield aborted();
          yield { type: kind, text: text.slice(i, i + chunkSize) };
        }
      }
      if (signal?.aborted) return yield aborted();
      const toolCalls = (step.toolCalls ?? []).map((call, i) => ({
        id: call.id ?? `call_${callIndex + 1}_${i + 1}`,
        name: call.name,
        arguments: typeof call.arguments === "string" ? call.arguments : JSON.stringify(call.arguments ?? {}),
      }));
      yield {
        type: "done",
        message: {
          content: step.text ?? "",
          ...(step.thinking && { thinking: step.thinking }),
          toolCalls,
          finishReason: step.finishReason ?? (toolCalls.length > 0 ? "tool_calls" : "stop"),
          usage: { inputTokens: 0, outputTokens: 0, ...step.usage },
        },
      };
    },
  };
}
