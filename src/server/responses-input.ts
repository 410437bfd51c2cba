import { z } from "zod";
import { AgentloopError } from "../core/errors.js";
import { DEFAULT_MAX_MEDIA_BYTES, imagePart } from "../core/media.js";
import type { AssistantMessage, ImageInput, MediaPart, Message, UserInput } from "../core/messages.js";
import { echoed } from "../core/redact.js";
import { clientToolFields } from "./client-tools.js";
import { describeRequestIssue, type RequestProblem, type RunInput } from "./openai-compat.js";
import { compactionMessage, compactionSummary } from "./responses-compact.js";

const part = z.object({ type: z.string() }).loose();
const content = z.union([z.string(), z.array(part)]);

/**
 * The request fields the response object echoes, each with its value when the request has none
 * (what OpenAI's API answers): numbers where the Open Responses schema wants numbers.
 */
const ECHOED = [
  ["temperature", z.number().nullish(), 1],
  ["top_p", z.number().nullish(), 1],
  ["presence_penalty", z.number().nullish(), 0],
  ["frequency_penalty", z.number().nullish(), 0],
  ["top_logprobs", z.number().int().nullish(), 0],
  ["max_output_tokens", z.number().int().nullish(), null],
  ["max_tool_calls", z.number().int().nullish(), null],
  ["reasoning", z.record(z.string(), z.unknown()).nullish(), null],
  ["service_tier", z.string().nullish(), "default"],
  ["safety_identifier", z.string().nullish(), null],
  ["prompt_cache_key", z.string().nullish(), null],
  ["truncation", z.enum(["auto", "disabled"]).nullish(), "disabled"],
  ["metadata", z.record(z.string(), z.string()).nullish(), {}],
] as const;

/**
 * The part of a Responses API request (`POST /v1/responses`) the server reads. `text.format`
 * json_schema (or json_object) is the run's output schema (see `requestedFormat`); `tools`,
 * `tool_choice` and `parallel_tool_calls` are the client's own tools (see `clientToolsOf`); the
 * sampling fields (`temperature`, `reasoning`, ...) are accepted and echoed in the response
 * object, not applied: the agent's own settings apply.
 */
export const responsesRequestSchema = z
  .object({
    model: z.string().optional(),
    input: z.union([z.string(), z.array(z.record(z.string(), z.unknown()))]),
    instructions: z.string().nullish(),
    stream: z.boolean().nullish(),
    previous_response_id: z.string().min(1).nullish(),
    /** `false`: the run is not stored, even when the server has a store. */
    store: z.boolean().nullish(),
    text: z.object({ format: z.unknown().optional() }).loose().nullish(),
    background: z
      .literal(false, { error: "background responses are not supported: send the request without it." })
      .nullish(),
    ...clientToolFields,
    ...Object.fromEntries(ECHOED.map(([name, type]) => [name, type])),
  })
  .loose();

/** The fields of the response object that echo the request (`ECHOED`), with their defaults. */
export function echoedFields(request: ResponsesRequest): Record<string, unknown> {
  const body = request as Record<string, unknown>;
  return Object.fromEntries(ECHOED.map(([name, , fallback]) => [name, body[name] ?? fallback]));
}

export type ResponsesRequest = z.infer<typeof responsesRequestSchema>;

const message = z.object({
  role: z.enum(["user", "assistant", "system", "developer"]),
  content,
});
const functionCall = z.object({ call_id: z.string(), name: z.string(), arguments: z.string() });
const functionCallOutput = z.object({ call_id: z.string(), output: content });

/** Text of a content list: text parts (`input_text`, `output_text`, `text`) as they are, others named. */
function textOf(value: z.infer<typeof content>): string {
  if (typeof value === "string") return value;
  return value
    .map((p) =>
      typeof p.text === "string"
        ? p.text
        : typeof p.refusal === "string"
          ? p.refusal
          : p.type === "input_image"
            ? ""
            : `[${p.type} omitted]`,
    )
    .join("");
}

/** The one-line problem of an item that does not parse as `schema`, its path under `param`. */
function itemProblem(error: z.ZodError, param: string, kind: string): RequestProblem {
  const { message: detail, param: field } = describeRequestIssue(error);
  const at = field ? `${param}.${field}` : param;
  return { message: `${at}: ${detail.replace(/^[^:]*: /, "")} (in a ${kind} item)`, param: at };
}

/**
 * Maps `input` to a run, as `toRunInput` does for chat messages: system and developer messages
 * become instructions (after `instructions`, both appended to the agent's own), `function_call`
 * items and their `function_call_output`s are kept in the history, `reasoning` items (another
 * model's) are skipped, and the last item must be the user's new message. Every function call
 * must be answered before the next message.
 * @returns a problem for a 400 instead, when the input cannot be run.
 */
export function toResponsesRunInput(request: ResponsesRequest): RunInput | RequestProblem {
  const instructions: string[] = request.instructions ? [request.instructions] : [];
  if (typeof request.input === "string")
    return { instructions: instructions.join("\n\n"), history: [], input: request.input };
  const history: Message[] = [];
  const callNames = new Map<string, string>();
  const unanswered = new Set<string>();
  let assistant: AssistantMessage | undefined;
  for (const [i, item] of request.input.entries()) {
    const param = `input.${i}`;
    const kind = typeof item.type === "string" ? item.type : "message";
    if (kind === "reasoning") continue;
    if (kind === "compaction") {
      const summary = compactionSummary(item);
      if (summary === undefined) {
        const message = `${param}: this compaction item was not made by this server (POST /v1/responses/compact here makes one it reads).`;
        return { message, param };
      }
      if (unanswered.size > 0) return unansweredProblem(unanswered, param);
      history.push(compactionMessage(summary));
      assistant = undefined;
      continue;
    }
    if (kind === "function_call_output") {
      const parsed = functionCallOutput.safeParse(item);
      if (!parsed.success) return itemProblem(parsed.error, param, kind);
      const { call_id: id, output } = parsed.data;
      const name = callNames.get(id);
      if (name === undefined || !unanswered.delete(id)) {
        return {
          message: `${param}: no function_call with call_id '${echoed(id)}' is waiting for this output.`,
          param,
        };
      }
      history.push({ role: "tool", toolCallId: id, name, content: textOf(output), isError: false });
      assistant = undefined;
      continue;
    }
    if (kind === "function_call") {
      const parsed = functionCall.safeParse(item);
      if (!parsed.success) return itemProblem(parsed.error, param, kind);
      const { call_id: id, name, arguments: args } = parsed.data;
      if (!assistant) {
        if (unanswered.size > 0) return unansweredProblem(unanswered, param);
        assistant = { role: "assistant", content: "" };
        history.push(assistant);
      }
      assistant.toolCalls = [...(assistant.toolCalls ?? []), { id, name, arguments: args }];
      callNames.set(id, name);
      unanswered.add(id);
      continue;
    }
    if (kind !== "message") {
      const message = `${param}: items of type '${echoed(kind)}' are not supported here: send messages, function_call and function_call_output items.`;
      return { message, param: `${param}.type` };
    }
    const parsed = message.safeParse(item);
    if (!parsed.success) return itemProblem(parsed.error, param, kind);
    const { role, content: value } = parsed.data;
    if (unanswered.size > 0) return unansweredProblem(unanswered, param);
    if (role === "system" || role === "developer") {
      instructions.push(textOf(value));
      continue;
    }
    if (role === "user") {
      const media = inputImages(value, param);
      if (!Array.isArray(media)) return media;
      history.push({ role: "user", content: textOf(value), ...(media.length > 0 && { media }) });
      assistant = undefined;
    } else {
      // Text before the calls of the same turn is one assistant message with them.
      assistant = { role: "assistant", content: textOf(value) };
      history.push(assistant);
    }
  }
  const last = history.pop();
  if (last?.role !== "user") {
    const problem = "input: the last item must be a user message (the input of the run).";
    return { message: problem, param: "input" };
  }
  const images = (last.media ?? []).map((part): ImageInput => ({ type: "image", image: part.url }));
  const input: UserInput =
    images.length > 0 ? [{ type: "text", text: last.content }, ...images] : last.content;
  return { instructions: instructions.filter(Boolean).join("\n\n"), history, input };
}

/**
 * A user message's `input_image` parts (`image_url`: an http(s) or data: URL), checked as the
 * agent checks its input; a `file_id` image cannot be fetched here and is refused.
 */
function inputImages(value: z.infer<typeof content>, param: string): MediaPart[] | RequestProblem {
  if (typeof value === "string") return [];
  const media: MediaPart[] = [];
  for (const [j, p] of value.entries()) {
    if (p.type !== "input_image") continue;
    const at = `${param}.content.${j}`;
    const url = typeof p.image_url === "string" ? p.image_url.trim() : "";
    if (!/^(https?:|data:)/i.test(url)) {
      const message = `${at}: input_image needs image_url, an http(s) URL or a data: URL (data:image/png;base64,...); file_id is not supported here.`;
      return { message, param: at };
    }
    try {
      media.push(imagePart({ type: "image", image: url }, at, DEFAULT_MAX_MEDIA_BYTES));
    } catch (error) {
      if (!(error instanceof AgentloopError)) throw error;
      return {
        message: error.message,
        param: at,
        ...(error.code === "image_too_large" && { status: 413 as const }),
      };
    }
  }
  return media;
}

function unansweredProblem(calls: ReadonlySet<string>, param: string): RequestProblem {
  const ids = echoed([...calls].join("', '"), 300);
  return { message: `${param}: the function calls '${ids}' have no function_call_output before it.`, param };
}
