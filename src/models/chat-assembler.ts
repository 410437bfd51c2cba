import { isObject } from "../core/json.js";
import { nestedTooDeep, type ToolCall, tooDeepMessage, type Usage } from "../core/messages.js";
import type { ModelEvent, ModelReply } from "./adapter.js";

/**
 * Assembles OpenAI-compatible Chat Completions output into a `ModelReply`. Pure: no I/O.
 *
 * Streaming: call `push(chunk)` with each parsed `chat.completion.chunk` (it returns the
 * `text_delta` / `thinking_delta` events to emit), then `complete` tells whether the stream
 * ended properly (a finish_reason, or a usage report in a chunk without choices, arrived) and
 * `reply()` gives the result.
 * Non-streaming: `completionToReply(json)` maps a whole `chat.completion`.
 *
 * Tolerated provider quirks: chunks with empty `choices` (Azure `prompt_filter_results`, usage
 * chunks), `usage: null`, usage on the finish chunk or in groq's `x_groq.usage`; reasoning in
 * `delta.reasoning_content` or `delta.reasoning`; tool calls with arguments split over many chunks,
 * interleaved by `index`, an `index` that does not start at 0 or is missing (continues the current
 * call), `id` only on the first delta, `"id": ""` on continuations, an index reused for a new call
 * (a new non-empty id starts a new call), two calls with the same id at two indexes (two calls),
 * `function.arguments` as an object (serialised to JSON),
 * a whole call in one delta (Ollama, vLLM), and Ollama's whole calls with neither `index` nor `id`
 * (several in one chunk, or one after another: a named delta after a call with complete JSON
 * arguments starts a new call), and likewise a call's header (id and name) again after its complete
 * arguments, at the same index or none (two calls with one id); `content: null` (vLLM, llama.cpp server); extra fields such as
 * llama.cpp's `timings` or vLLM's `stop_reason` are ignored; `content` as a list of typed parts
 * (Mistral, Magistral: `{"type":"text","text"}` is text, `{"type":"thinking","thinking":[{"type":"text",
 * "text"}]}` is reasoning, other parts are skipped); a `refusal` (OpenAI) is kept apart from the
 * content, as `ModelReply.refusal`. Only choice 0 is read. Tool calls keep
 * their order of first appearance; a call that never got an id gets `call_<n>` (n = its position).
 */

type Json = Record<string, unknown>;

interface PendingCall {
  id: string;
  name: string;
  arguments: string;
  /** The wire `index` of its first delta, when it had one. */
  index: number | undefined;
  /** Whether the last piece of `arguments` ends in `}` (they may be whole: worth a parse). */
  closed: boolean;
  /** Object arguments nested too deep to serialise: the call becomes an error result. */
  tooDeep?: boolean;
}

const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);
const num = (v: unknown): number | undefined => (typeof v === "number" && Number.isFinite(v) ? v : undefined);

/** Maps an OpenAI-style usage object; `undefined` when there is none. */
export function mapUsage(raw: unknown): Usage | undefined {
  if (!isObject(raw)) return undefined;
  const usage: Usage = {
    inputTokens: num(raw.prompt_tokens) ?? num(raw.input_tokens) ?? 0,
    outputTokens: num(raw.completion_tokens) ?? num(raw.output_tokens) ?? 0,
  };
  const prompt = raw.prompt_tokens_details ?? raw.input_tokens_details;
  const cached = isObject(prompt) ? num(prompt.cached_tokens) : undefined;
  if (cached !== undefined) usage.cachedInputTokens = cached;
  const completion = raw.completion_tokens_details ?? raw.output_tokens_details;
  const reasoning = isObject(completion) ? num(completion.reasoning_tokens) : undefined;
  if (reasoning !== undefined) usage.reasoningTokens = reasoning;
  return usage;
}

/**
 * Tool-call arguments as text: strings as sent, objects (Ollama style) serialised; `undefined` for
 * an object nested too deep to serialise (see `nestedTooDeep`).
 */
function argumentsText(v: unknown): string | undefined {
  if (typeof v === "string") return v;
  if (v === undefined || v === null) return "";
  return nestedTooDeep(v) ? undefined : JSON.stringify(v);
}

/** Reasoning text of a delta or message: `reasoning_content` (DeepSeek, vLLM) or `reasoning` (groq, Ollama, OpenRouter). */
function reasoningText(o: Json): string {
  return str(o.reasoning_content) || str(o.reasoning) || "";
}

/** Text and reasoning of a `content` that is a string, or a list of typed parts (Mistral). */
function contentOf(content: unknown): { text: string; thinking: string } {
  if (typeof content === "string") return { text: content, thinking: "" };
  let text = "";
  let thinking = "";
  if (Array.isArray(content)) {
    for (const part of content) {
      if (!isObject(part)) continue;
      if (part.type === "text") text += str(part.text) ?? "";
      else if (part.type === "thinking") thinking += partsText(part.thinking);
    }
  }
  return { text, thinking };
}

/** A thinking part's text: a string, or a list of `{"type":"text","text"}` parts. */
function partsText(value: unknown): string {
  if (typeof value === "string") return value;
  if (!Array.isArray(value)) return "";
  let text = "";
  for (const part of value) if (isObject(part) && part.type === "text") text += str(part.text) ?? "";
  return text;
}

/**
 * Whether a call's arguments so far are one whole JSON object (checked only when a delta names a
 * tool again, and parsed only when their last piece ends in `}`: never a pass over the whole text
 * per delta, which a server that repeats the header on every delta would make quadratic).
 */
function isWholeJson(call: PendingCall): boolean {
  if (!call.closed) return false;
  try {
    JSON.parse(call.arguments);
    return true;
  } catch {
    return false;
  }
}

/** Whether a piece of arguments ends in `}`, trailing whitespace aside (undefined for whitespace alone). */
function endsClosed(piece: string): boolean | undefined {
  for (let i = piece.length - 1; i >= 0; i--) {
    const c = piece.charCodeAt(i);
    if (c !== 32 && c !== 9 && c !== 10 && c !== 13) return c === 125;
  }
  return undefined;
}

function toolCall(id: string, name: string, args: string, tooDeep: boolean): ToolCall {
  return tooDeep
    ? { id, name, arguments: args, invalid: tooDeepMessage(name) }
    : { id, name, arguments: args };
}

function choiceZero(chunk: Json): Json | undefined {
  if (!Array.isArray(chunk.choices)) return undefined;
  for (const c of chunk.choices) if (isObject(c) && (num(c.index) ?? 0) === 0) return c;
  return undefined;
}

export class ChatStreamAssembler {
  private content = "";
  private thinking = "";
  private refusal = "";
  private finishReason: string | undefined;
  private usage: Usage | undefined;
  /** A usage report arrived in a chunk without choices (the last chunk of an OpenAI stream). */
  private usageReported = false;
  private readonly calls: PendingCall[] = [];
  /** The call each wire `index` currently refers to (a reused index moves to the newer call). */
  private readonly byIndex = new Map<number, PendingCall>();
  /** The call the last tool-call delta went to (target of deltas without `index`). */
  private current: PendingCall | undefined;
  /** The last chunk with a finish reason or usage: the response's id and model are read from it. */
  private last: Json | undefined;

  /** Feeds one parsed chunk; returns the delta events it produced, in order. */
  push(chunk: unknown): ModelEvent[] {
    if (!isObject(chunk)) return [];
    const usage =
      mapUsage(chunk.usage) ?? (isObject(chunk.x_groq) ? mapUsage(chunk.x_groq.usage) : undefined);
    if (usage) {
      this.usage = usage;
      this.last = chunk;
      // Usage on every chunk (vLLM's continuous_usage_stats) must not pass for the end of the stream.
      if (!Array.isArray(chunk.choices) || chunk.choices.length === 0) this.usageReported = true;
    }
    const choice = choiceZero(chunk);
    if (!choice) return [];
    const events: ModelEvent[] = [];
    const delta = isObject(choice.delta) ? choice.delta : isObject(choice.message) ? choice.message : {};
    // Typed parts (Mistral) only allocate when they come.
    const parts = Array.isArray(delta.content) ? contentOf(delta.content) : undefined;
    const reasoning = parts ? reasoningText(delta) + parts.thinking : reasoningText(delta);
    if (reasoning) {
      this.thinking += reasoning;
      events.push({ type: "thinking_delta", text: reasoning });
    }
    const text = parts ? parts.text : str(delta.content);
    if (text) {
      this.content += text;
      events.push({ type: "text_delta", text });
    }
    const refusal = str(delta.refusal);
    if (refusal) this.refusal += refusal;
    if (Array.isArray(delta.tool_calls)) {
      let sibling = false;
      for (const tc of delta.tool_calls) {
        if (!isObject(tc)) continue;
        this.addToolDelta(tc, sibling);
        sibling = true;
      }
    }
    const finish = str(choice.finish_reason);
    if (finish) {
      this.finishReason = finish;
      this.last = chunk;
    }
    return events;
  }

  /** `sibling`: not the first entry of its chunk's `tool_calls`, so never the continuation of the one before. */
  private addToolDelta(tc: Json, sibling: boolean): void {
    const id = str(tc.id) || undefined; // "" on continuations is not a new id
    const index = num(tc.index);
    const fn = isObject(tc.function) ? tc.function : {};
    const name = str(fn.name) ?? "";
    const text = argumentsText(fn.arguments);
    const args = text ?? "";
    let target = id === undefined ? undefined : this.withId(id, index);
    if (!target) {
      const base = index === undefined ? this.indexless(name) : this.byIndex.get(index);
      // Same call unless a new id arrives for a call that already has a different one.
      if (base && (id === undefined || base.id === "" || base.id === id) && !(sibling && index === undefined))
        target = base;
    }
    // A header (id and name) again for a call that already has its name and complete arguments
    // is a second call under the same id (the loop makes the ids unique), not a continuation.
    if (target && id !== undefined && name && target.name && isWholeJson(target)) target = undefined;
    if (!target) {
      if (id === undefined && !name && text === "") return; // nothing to start a call with
      target = { id: "", name: "", arguments: "", index, closed: false };
      this.calls.push(target);
    }
    if (id !== undefined && target.id === "") target.id = id;
    if (name && !target.name) target.name = name;
    target.arguments += args;
    target.closed = endsClosed(args) ?? target.closed;
    if (text === undefined) target.tooDeep = true;
    if (index !== undefined) this.byIndex.set(index, target);
    this.current = target;
  }

  /**
   * The latest call with this id that a delta at `index` may continue: one started at the same
   * index, or where either has none. A model that gives two calls the same id at two indexes
   * made two calls (the loop then makes their ids unique).
   */
  private withId(id: string, index: number | undefined): PendingCall | undefined {
    for (let i = this.calls.length - 1; i >= 0; i--) {
      const c = this.calls[i] as PendingCall;
      if (c.id === id && (index === undefined || c.index === undefined || c.index === index)) return c;
    }
    return undefined;
  }

  /**
   * The call an index-less delta continues: the current one, unless the delta names a tool while
   * the current call already has a name and complete JSON arguments (Ollama sends whole calls
   * with neither `index` nor `id`).
   */
  private indexless(name: string): PendingCall | undefined {
    const current = this.current;
    if (!current || !name || !current.name) return current;
    return isWholeJson(current) ? undefined : current;
  }

  /** True once the stream said it was finished: a finish_reason, or a usage report in a chunk without choices. */
  get complete(): boolean {
    return this.finishReason !== undefined || this.usageReported;
  }

  /** The assembled reply so far (call after the stream ended and `complete` is true). */
  reply(): ModelReply {
    const toolCalls = this.calls
      .filter((c) => c.id || c.name || c.arguments)
      .map((c, i) => toolCall(c.id || `call_${i}`, c.name, c.arguments, c.tooDeep === true));
    const reply: ModelReply = {
      content: this.content,
      toolCalls,
      finishReason: this.finishReason ?? (toolCalls.length > 0 ? "tool_calls" : "stop"),
      usage: this.usage ?? { inputTokens: 0, outputTokens: 0 },
    };
    if (this.thinking) reply.thinking = this.thinking;
    if (this.refusal) reply.refusal = this.refusal;
    if (this.last) responseOf(this.last, reply);
    return reply;
  }
}

/** The response's `id` and `model` onto its reply, when the body or chunk has them. */
function responseOf(body: Json, reply: ModelReply): void {
  const id = str(body.id);
  if (id) reply.id = id;
  const model = str(body.model);
  if (model) reply.model = model;
}

/**
 * Maps a non-streaming `chat.completion` body (choice 0's `message`, with a non-standard
 * `message.reasoning` / `reasoning_content` as thinking). Each entry of `message.tool_calls` is
 * its own call. Returns `undefined` when the body has no choice with a message.
 */
export function completionToReply(body: unknown): ModelReply | undefined {
  if (!isObject(body)) return undefined;
  const choice = choiceZero(body);
  if (!choice || !isObject(choice.message)) return undefined;
  const message = choice.message;
  const calls = Array.isArray(message.tool_calls) ? message.tool_calls.filter(isObject) : [];
  const toolCalls = calls.map((tc, i) => {
    const fn = isObject(tc.function) ? tc.function : {};
    const args = argumentsText(fn.arguments);
    return toolCall(str(tc.id) || `call_${i}`, str(fn.name) ?? "", args ?? "", args === undefined);
  });
  const { text, thinking: typedThinking } = contentOf(message.content);
  const reply: ModelReply = {
    content: text,
    toolCalls,
    finishReason: str(choice.finish_reason) ?? (toolCalls.length > 0 ? "tool_calls" : "stop"),
    usage: mapUsage(body.usage) ?? { inputTokens: 0, outputTokens: 0 },
  };
  const thinking = reasoningText(message) + typedThinking;
  if (thinking) reply.thinking = thinking;
  const refusal = str(message.refusal);
  if (refusal) reply.refusal = refusal;
  responseOf(body, reply);
  return reply;
}
