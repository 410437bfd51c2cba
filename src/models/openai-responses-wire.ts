import type OpenAI from "openai";
import { isObject } from "../core/json.js";
import type { AssistantMessage, MediaPart, Message } from "../core/messages.js";
import type { ModelRequest, ToolSpec } from "./adapter.js";
import { wireArguments } from "./openai-wire.js";
import { jsonSchemaFormat } from "./strict-schema.js";

/**
 * Request mapping of the OpenAI Responses adapter, pure (no I/O): runtime messages and tools → a
 * stateless `responses.create` body (`store: false`; the whole conversation is sent every time,
 * with the encrypted reasoning items the model returned, so reasoning models keep their chain of
 * thought across tool calls).
 */

type InputItem = OpenAI.Responses.ResponseInputItem;
type ReasoningItem = OpenAI.Responses.ResponseReasoningItem;
type ContentPart = OpenAI.Responses.ResponseInputText | OpenAI.Responses.ResponseInputImage;

/** Images beside a user message's or a tool result's text. */
const mediaOf = (m: Message): readonly MediaPart[] => (m.role === "assistant" ? [] : (m.media ?? []));

/** An image as an `input_image` part; audio, which this adapter does not send, as a note naming it. */
function mediaPart(part: MediaPart): ContentPart {
  if (part.type === "image") return { type: "input_image", image_url: part.url, detail: "auto" };
  return { type: "input_text", text: `[${part.type} not sent: the Responses adapter sends images only]` };
}

/** Text, then the media, as content parts. */
function withMedia(text: string, media: readonly MediaPart[]): ContentPart[] {
  return [...(text ? [{ type: "input_text" as const, text }] : []), ...media.map(mediaPart)];
}

/** The key of this adapter's data on an assistant message (`AssistantMessage.providerData`). */
export const RESPONSES_DATA_KEY = "openai-responses";

/** A reasoning item as the API returned it, kept to be sent back. */
export interface ReasoningRef {
  type: "reasoning";
  id?: string;
  summary: { type: "summary_text"; text: string }[];
  encrypted_content: string;
}

/**
 * Where each output item of a reply was, in output order: reasoning items in full, the others as
 * placeholders (their text and calls are the message's own `content` and `toolCalls`).
 */
export type OutputRef = ReasoningRef | { type: "message" } | { type: "function_call"; call_id: string };

/** What the adapter keeps on an assistant message: `providerData["openai-responses"]`. */
export interface ResponsesData {
  items: OutputRef[];
}

/** Ids of OpenAI reasoning models (o-series, gpt-5 and later, codex), which get reasoning settings by default. */
const REASONING_MODEL = /^(?:openai\/)?(o\d|gpt-[5-9]|codex)(?!.*-chat)/i;

function isReasoningModel(model: string): boolean {
  return REASONING_MODEL.test(model);
}

/** The adapter's data on `m`, when it has some in the expected shape. */
function dataOf(m: AssistantMessage): OutputRef[] | undefined {
  const data = m.providerData?.[RESPONSES_DATA_KEY];
  if (!isObject(data) || !Array.isArray(data.items)) return undefined;
  return data.items.filter(isObject) as OutputRef[];
}

/**
 * The assistant message as input items, in the order the model produced them when the adapter
 * kept it (reasoning, text, calls), else text then calls. Reasoning goes back as the official SDKs
 * send it with `store: false`: its item id, summary and encrypted content (without an id only when
 * the provider gave none, which the API accepts with the encrypted content).
 */
function assistantItems(m: AssistantMessage, out: InputItem[]): void {
  const calls = m.toolCalls ?? [];
  const sent = new Set<string>();
  let textSent = m.content === "";
  const text = () => {
    // With its type: llama.cpp's server refuses an assistant item without one (400).
    if (!textSent) out.push({ type: "message", role: "assistant", content: m.content });
    textSent = true;
  };
  const call = (id: string) => {
    const c = calls.find((candidate) => candidate.id === id);
    if (!c || sent.has(id)) return;
    sent.add(id);
    out.push({ type: "function_call", call_id: c.id, name: c.name, arguments: wireArguments(c) });
  };
  for (const ref of dataOf(m) ?? []) {
    if (ref.type === "reasoning" && typeof ref.encrypted_content === "string") {
      const summary = Array.isArray(ref.summary) ? ref.summary : [];
      const { encrypted_content } = ref;
      out.push(
        typeof ref.id === "string" && ref.id !== ""
          ? { type: "reasoning", id: ref.id, summary, encrypted_content }
          : // The SDK's type requires an id the provider did not give; the API takes the item without one.
            ({ type: "reasoning", summary, encrypted_content } as Omit<ReasoningItem, "id"> as ReasoningItem),
      );
    } else if (ref.type === "message") text();
    else if (ref.type === "function_call") call(ref.call_id);
  }
  text();
  for (const c of calls) call(c.id);
}

/** One runtime message as input items. */
function messageItems(m: Message): InputItem[] {
  const media = mediaOf(m);
  if (m.role === "user") {
    return [{ role: "user", content: media.length > 0 ? withMedia(m.content, media) : m.content }];
  }
  if (m.role === "tool") {
    const output = media.length > 0 ? withMedia(m.content, media) : m.content;
    return [{ type: "function_call_output", call_id: m.toolCallId, output }];
  }
  const out: InputItem[] = [];
  assistantItems(m, out);
  return out;
}

/**
 * What a request reuses from the requests before it (one per adapter): a message never changes
 * once it is in a history (the loop only appends), so each one is mapped once; a tool list likewise.
 */
export interface ResponsesWireCache {
  messages: WeakMap<Message, InputItem[]>;
  tools: WeakMap<readonly ToolSpec[], unknown[]>;
}

export const responsesWireCache = (): ResponsesWireCache => ({
  messages: new WeakMap(),
  tools: new WeakMap(),
});

/**
 * Maps the runtime messages to Responses input items: user text as user messages, assistant
 * replies as their reasoning, text and `function_call` items, tool results as
 * `function_call_output` items. Images go as `input_image` parts: after a user message's text,
 * and in a tool result's output, after its text. With a `cache`, messages mapped before are reused.
 */
function toResponsesInput(messages: readonly Message[], cache?: ResponsesWireCache): InputItem[] {
  const out: InputItem[] = [];
  for (const m of messages) {
    let items = cache?.messages.get(m);
    if (!items) {
      items = messageItems(m);
      cache?.messages.set(m, items);
    }
    for (const item of items) out.push(item);
  }
  return out;
}

/** Whether the input sends back a reasoning item (they carry encrypted content). The latest are near the end. */
function hasReasoning(input: readonly InputItem[]): boolean {
  for (let i = input.length - 1; i >= 0; i--)
    if ((input[i] as { type?: string }).type === "reasoning") return true;
  return false;
}

export interface ResponsesRequestOptions {
  model: string;
  stream: boolean;
  /** Sent as `reasoning`; `false` sends none. Default `{ summary: "auto" }` for reasoning models, else none. */
  reasoning?: { effort?: string; summary?: string | null } | false;
  parallelToolCalls?: boolean;
  extraBody?: Record<string, unknown>;
  /** The adapter's `responsesWireCache()`: messages and tool lists mapped by earlier requests are reused. */
  cache?: ResponsesWireCache;
}

/**
 * The request body: model, `instructions` (the system prompt, when non-empty), input, function
 * tools (`strict: false`: the tools' schemas are sent as they are), `parallel_tool_calls` (only
 * with tools), `reasoning` and `include: ["reasoning.encrypted_content"]` (with reasoning
 * settings; `include` alone when the history holds encrypted reasoning, unless `reasoning` is
 * `false`), `text.format` json_schema (`strict` when the schema allows, as Chat Completions'
 * `response_format`) for a request with `output` (structured output),
 * `store: false`, then `extraBody`, then `stream`.
 */
export function toResponsesRequestBody(
  request: ModelRequest,
  o: ResponsesRequestOptions,
): Record<string, unknown> {
  let tools = o.cache?.tools.get(request.tools);
  if (!tools) {
    tools = request.tools.map((t) => ({
      type: "function" as const,
      name: t.name,
      description: t.description,
      parameters: t.parameters,
      strict: false,
    }));
    o.cache?.tools.set(request.tools, tools);
  }
  const reasoning = o.reasoning ?? (isReasoningModel(o.model) ? { summary: "auto" } : false);
  const input = toResponsesInput(request.messages, o.cache);
  // A model id it does not know (an Azure deployment name) still gets its reasoning back once a
  // reply has shown encrypted reasoning: read from the history, so a resumed run asks alike.
  const encrypted = reasoning !== false || (o.reasoning !== false && hasReasoning(input));
  return {
    model: o.model,
    ...(request.system ? { instructions: request.system } : {}),
    input,
    ...(tools.length > 0 ? { tools } : {}),
    ...(tools.length > 0 && (request.parallelToolCalls ?? o.parallelToolCalls) !== undefined
      ? { parallel_tool_calls: request.parallelToolCalls ?? o.parallelToolCalls }
      : {}),
    ...(tools.length > 0 &&
      request.toolChoice !== undefined && {
        tool_choice:
          typeof request.toolChoice === "string"
            ? request.toolChoice
            : { type: "function", name: request.toolChoice.name },
      }),
    ...(reasoning ? { reasoning } : {}),
    ...(encrypted ? { include: ["reasoning.encrypted_content"] } : {}),
    ...(request.output && { text: { format: { type: "json_schema", ...jsonSchemaFormat(request.output) } } }),
    store: false,
    ...o.extraBody,
    stream: o.stream,
  };
}
