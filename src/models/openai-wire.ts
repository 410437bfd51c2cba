import type OpenAI from "openai";
import { AzureOpenAI } from "openai/azure";
import { describeMedia, parseDataUrl } from "../core/media.js";
import type { MediaPart, Message, ToolCall, ToolMessage } from "../core/messages.js";
import type { ModelRequest, ToolSpec } from "./adapter.js";
import { jsonSchemaFormat } from "./strict-schema.js";

/** Request mapping of the OpenAI-compatible adapter: runtime messages and tools → a Chat Completions body. */

const REASONING_MODEL = /^(o1|o3|o4|gpt-5)/;

type WireMessage = OpenAI.Chat.Completions.ChatCompletionMessageParam;
type WireTool = OpenAI.Chat.Completions.ChatCompletionFunctionTool;
type WirePart = OpenAI.Chat.Completions.ChatCompletionContentPart;
export type SystemRole = "system" | "developer";

/** Chat Completions' `input_audio` formats by media type. */
const AUDIO_FORMATS: Readonly<Record<string, "wav" | "mp3">> = {
  "audio/wav": "wav",
  "audio/x-wav": "wav",
  "audio/wave": "wav",
  "audio/mpeg": "mp3",
  "audio/mp3": "mp3",
};

/** One image (`image_url`, a URL or a data URL) or audio clip (`input_audio`, or a note when the model takes none). */
function mediaPart(part: MediaPart, audio: boolean): WirePart {
  if (part.type === "image") return { type: "image_url", image_url: { url: part.url } };
  const inline = parseDataUrl(part.url);
  const format = inline && AUDIO_FORMATS[inline.mediaType];
  if (audio && inline && format) return { type: "input_audio", input_audio: { data: inline.data, format } };
  return {
    type: "text",
    text: `${describeMedia(part)} (not sent: this model takes no audio in this format)`,
  };
}

/**
 * The user message that carries the images of tool results, which tool messages cannot: one text
 * part naming each result, then its media.
 */
function toolMediaMessage(results: readonly ToolMessage[], audio: boolean): WireMessage {
  const content: WirePart[] = [];
  for (const result of results) {
    content.push({ type: "text", text: `Tool '${result.name}' result (${result.toolCallId}) included:` });
    for (const part of result.media ?? []) content.push(mediaPart(part, audio));
  }
  return { role: "user", content };
}

/**
 * What a request reuses from the requests before it; one per adapter, whose options shape the
 * mapping. A message never changes once it is in a history (the loop only appends), so each one is
 * mapped once, on the first request that carries it; a tool list likewise; and a history array's
 * mapping is kept and extended while the array only grows (no look-up per message).
 */
export interface ChatWireCache {
  messages: WeakMap<Message, WireMessage>;
  tools: WeakMap<readonly ToolSpec[], WireTool[]>;
  histories: WeakMap<readonly Message[], MappedHistory>;
}

/** A history array's messages `[0, upTo)` mapped with this system prompt, role and audio setting. */
interface MappedHistory {
  system: string;
  systemRole: SystemRole;
  audio: boolean;
  upTo: number;
  last: Message | undefined;
  /** A user message carrying tool-result media ends `out`: a tool result right after `upTo` would belong before it. */
  mediaLast: boolean;
  out: WireMessage[];
}

export const chatWireCache = (): ChatWireCache => ({
  messages: new WeakMap(),
  tools: new WeakMap(),
  histories: new WeakMap(),
});

/** One runtime message as a Chat Completions message (the images of a tool result go apart, see `toChatMessages`). */
function wireMessage(m: Message, audio: boolean): WireMessage {
  if (m.role === "user") {
    if (!m.media?.length) return { role: "user", content: m.content };
    const parts: WirePart[] = m.content ? [{ type: "text", text: m.content }] : [];
    for (const part of m.media) parts.push(mediaPart(part, audio));
    return { role: "user", content: parts };
  }
  if (m.role === "tool") return { role: "tool", tool_call_id: m.toolCallId, content: m.content };
  if (!m.toolCalls || m.toolCalls.length === 0) return { role: "assistant", content: m.content };
  return {
    role: "assistant",
    content: m.content || null,
    tool_calls: m.toolCalls.map((c) => ({
      id: c.id,
      type: "function" as const,
      function: { name: c.name, arguments: wireArguments(c) },
    })),
  };
}

/**
 * A call's arguments as a history sends them back: `{}` for an `invalid` call (its text may be
 * anything: cut off at the token limit, not JSON, which servers that parse the history answer
 * with a 500; its error result says what was wrong) and for empty arguments (some servers reject
 * ""), else the text, one JSON object (see `ToolCall.invalid`).
 */
export function wireArguments(c: ToolCall): string {
  return c.invalid === undefined && c.arguments !== "" ? c.arguments : "{}";
}

/**
 * Maps the runtime messages to Chat Completions messages (the system prompt first when non-empty).
 * A user message with images becomes content parts (its text, then `image_url` parts); the images
 * of tool results follow the run of tool messages in one user message. Audio goes as `input_audio`
 * (wav, mp3) only with `audio`, else as a note. With a `cache`, messages mapped before are reused.
 */
export function toChatMessages(
  system: string,
  messages: readonly Message[],
  systemRole: SystemRole = "system",
  audio = false,
  cache?: ChatWireCache,
): WireMessage[] {
  let mapped = cache?.histories.get(messages);
  // Only the system prompt changed (an iteration warning near the limit): its message is replaced.
  if (mapped && mapped.system !== system && mapped.system !== "" && system !== "") {
    mapped.out[0] = { role: systemRole, content: system };
    mapped.system = system;
  }
  const reusable =
    mapped !== undefined &&
    mapped.system === system &&
    mapped.systemRole === systemRole &&
    mapped.audio === audio &&
    mapped.upTo <= messages.length &&
    (mapped.upTo === 0 || messages[mapped.upTo - 1] === mapped.last) &&
    !(mapped.mediaLast && messages[mapped.upTo]?.role === "tool");
  if (!mapped || !reusable) {
    const out: WireMessage[] = system ? [{ role: systemRole, content: system }] : [];
    mapped = { system, systemRole, audio, upTo: 0, last: undefined, mediaLast: false, out };
    cache?.histories.set(messages, mapped);
  }
  const { out } = mapped;
  let withMedia: ToolMessage[] = [];
  for (let i = mapped.upTo; i < messages.length; i++) {
    const m = messages[i] as Message;
    let wire = cache?.messages.get(m);
    if (!wire) {
      wire = wireMessage(m, audio);
      cache?.messages.set(m, wire);
    }
    out.push(wire);
    mapped.mediaLast = false;
    if (m.role !== "tool") continue;
    if (m.media?.length) withMedia.push(m);
    if (withMedia.length > 0 && messages[i + 1]?.role !== "tool") {
      out.push(toolMediaMessage(withMedia, audio));
      withMedia = [];
      mapped.mediaLast = true;
    }
  }
  mapped.upTo = messages.length;
  mapped.last = messages[messages.length - 1];
  // A copy: the kept mapping grows with the history, a request's body must not.
  return cache ? out.slice() : out;
}

export interface ChatRequestOptions {
  model: string;
  stream: boolean;
  systemRole?: SystemRole;
  /** Send audio parts as `input_audio` (models that take audio). Default false: a note instead. */
  audio?: boolean;
  parallelToolCalls?: boolean;
  extraBody?: Record<string, unknown>;
  /** The adapter's `chatWireCache()`: messages and tool lists mapped by earlier requests are reused. */
  cache?: ChatWireCache;
}

/**
 * The request body: model, messages, tools, `parallel_tool_calls` and `tool_choice` (only with tools),
 * `response_format` (json_schema, `strict` when the schema allows) for a request with `output`,
 * stream flags, then `extraBody`.
 */
export function toChatRequestBody(request: ModelRequest, o: ChatRequestOptions): Record<string, unknown> {
  let tools = o.cache?.tools.get(request.tools);
  if (!tools) {
    tools = request.tools.map((t) => ({
      type: "function",
      function: { name: t.name, description: t.description, parameters: t.parameters },
    }));
    o.cache?.tools.set(request.tools, tools);
  }
  return {
    model: o.model,
    messages: toChatMessages(request.system, request.messages, o.systemRole, o.audio, o.cache),
    ...(tools.length > 0 ? { tools } : {}),
    ...(tools.length > 0 && (request.parallelToolCalls ?? o.parallelToolCalls) !== undefined
      ? { parallel_tool_calls: request.parallelToolCalls ?? o.parallelToolCalls }
      : {}),
    ...(tools.length > 0 &&
      request.toolChoice !== undefined && {
        tool_choice:
          typeof request.toolChoice === "string"
            ? request.toolChoice
            : { type: "function", function: { name: request.toolChoice.name } },
      }),
    ...(request.output && { response_format: responseFormat(request.output) }),
    ...(o.stream ? { stream_options: { include_usage: true } } : {}),
    ...o.extraBody,
    stream: o.stream,
  };
}

function responseFormat(output: NonNullable<ModelRequest["output"]>) {
  return { type: "json_schema", json_schema: jsonSchemaFormat(output) };
}

/** "developer" for an OpenAI reasoning model on api.openai.com, else "system". */
export function defaultSystemRole(model: string, client: OpenAI): SystemRole {
  let host = "";
  try {
    host = new URL(client.baseURL).hostname;
  } catch {}
  const openai = host === "api.openai.com" && !(client instanceof AzureOpenAI);
  return openai && REASONING_MODEL.test(model) ? "developer" : "system";
}
