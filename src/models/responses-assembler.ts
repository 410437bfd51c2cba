import { isJson, isObject } from "../core/json.js";
import type { ToolCall } from "../core/messages.js";
import type { ModelEvent, ModelReply } from "./adapter.js";
import { mapUsage } from "./chat-assembler.js";
import { ModelFailure } from "./model-errors.js";
import { type OutputRef, RESPONSES_DATA_KEY, type ReasoningRef } from "./openai-responses-wire.js";

/**
 * Assembles an OpenAI Responses event stream (or a whole `response` object) into a `ModelReply`.
 * Pure: no I/O.
 *
 * Call `push(event)` with each parsed stream event; it returns the `text_delta` /
 * `thinking_delta` events to emit. `complete` tells whether the response reached its end
 * (`response.completed` or `response.incomplete`); `reply()` gives the result. A
 * `response.failed` or an `error` event throws a `ModelFailure` ("provider_error") naming the
 * provider's message and code. For a non-streaming body, `pushResponse(body)`.
 *
 * - Output items are keyed by `output_index` (item ids may change between events, as GitHub
 *   Copilot's endpoint does), and kept in that order: parallel function calls come back in call
 *   order. An event without `output_index` (llama.cpp's server) goes to the item its `item_id`
 *   (or its item's `id` or `call_id`) names, else to the last item. An item only named in
 *   `response.completed` (never announced) is read from there.
 * - Text: `output_text` deltas; the text of `output_text.done` or `output_item.done` when nothing
 *   was streamed for it. Two message items (e.g. `phase` commentary, then the final answer) are
 *   separated by a blank line. Refusal parts are kept apart, as `refusal`.
 * - Thinking: reasoning summary deltas and `reasoning_text` deltas (open models), one part after
 *   the other separated by a blank line. Reasoning items with `encrypted_content` are kept, in
 *   output order with placeholders for the other items, in `providerData["openai-responses"]`, to be
 *   sent back on the next request.
 * - Function calls: `call_id`, `name`, the arguments deltas, replaced by the arguments of
 *   `function_call_arguments.done` / `output_item.done` when they come (servers that send them
 *   only there included); empty arguments are `{}`. A call of an incomplete response that never
 *   finished, or whose arguments are not JSON, gets `invalid` set: it is reported to the model,
 *   never executed.
 * - `finishReason`: `tool_calls` or `stop` for a completed response; for an incomplete one its
 *   `incomplete_details.reason` (`max_output_tokens`, `content_filter`). Usage: `input_tokens`,
 *   `output_tokens`, cached and reasoning tokens from their `_details`.
 */

type Json = Record<string, unknown>;

interface Item {
  kind: "message" | "reasoning" | "function_call" | "other";
  /** Text streamed for this item (message text, or reasoning of any part). */
  streamed: boolean;
  refusal: string;
  callId: string;
  name: string;
  args: string;
  done: boolean;
  reasoning?: ReasoningRef;
}

const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);
const num = (v: unknown): number | undefined => (typeof v === "number" && Number.isFinite(v) ? v : undefined);
const list = (v: unknown): Json[] => (Array.isArray(v) ? v.filter(isObject) : []);

const RESPONSES_CUT_OFF =
  "The response was cut off before this tool call's arguments were complete; ask for less at once or raise max_output_tokens.";

/** The provider's error of a failed response or an `error` event, as a one-line failure. */
function failure(error: unknown, fallback: string): ModelFailure {
  const e = isObject(error) ? error : {};
  const message = str(e.message) || fallback;
  const code = str(e.code) || str(e.type);
  return new ModelFailure("provider_error", `Model API error: ${message}${code ? ` (${code})` : ""}`);
}

export class ResponsesStreamAssembler {
  private readonly items = new Map<number, Item>();
  /**
   * Output indexes by item id (and function calls' `call_id`) of the items announced without an
   * `output_index`, for the events that name them; made by the first one (most streams never need it).
   */
  private ids: Map<string, number> | undefined;
  /** The ids announced by more than one item (two calls with one `call_id`); made by the first. */
  private shared: Set<string> | undefined;
  private content = "";
  private thinking = "";
  /** The reasoning part the last thinking text came from (`<output index>:<part>`). */
  private thinkingPart = "";
  /** Whether the current message item already added text (the separator goes before its first). */
  private messageWithText = -1;
  private status: "completed" | "incomplete" | undefined;
  private reason: string | undefined;
  private usage: ModelReply["usage"] | undefined;
  /** The response object of `response.completed` / `response.incomplete`: its id and model. */
  private response: Record<string, unknown> | undefined;

  /** Feeds one parsed stream event; returns the delta events it produced, in order. */
  push(event: unknown): ModelEvent[] {
    if (!isObject(event)) return [];
    // Without `output_index` (llama.cpp's server) the item is the one its `item_id` names.
    const index = num(event.output_index) ?? this.named(event.item_id, event.type);
    switch (event.type) {
      case "response.output_item.added": {
        if (index !== undefined) return this.added(index, event.item);
        // An announced item is a new one, even under an id an earlier item has.
        const at = this.items.size;
        this.name(event.item, at);
        return this.added(at, event.item);
      }
      case "response.output_item.done":
        return this.itemDone(
          index ?? this.itemIndex(event.item, event.type) ?? this.items.size - 1,
          event.item,
        );
      case "response.output_text.delta":
        return this.text(this.item(index, "message"), index ?? -1, str(event.delta));
      case "response.output_text.done": {
        const item = this.item(index, "message");
        return item.streamed ? [] : this.text(item, index ?? -1, str(event.text));
      }
      case "response.refusal.delta":
        this.item(index, "message").refusal += str(event.delta) ?? "";
        return [];
      case "response.refusal.done": {
        const item = this.item(index, "message");
        if (!item.refusal) item.refusal = str(event.refusal) ?? "";
        return [];
      }
      case "response.reasoning_summary_text.delta":
        return this.think(index, `s${num(event.summary_index) ?? 0}`, str(event.delta));
      case "response.reasoning_text.delta":
        return this.think(index, `c${num(event.content_index) ?? 0}`, str(event.delta));
      case "response.reasoning_summary_text.done":
      case "response.reasoning_text.done": {
        const part = `${event.type.includes("summary") ? "s" : "c"}${num(event.summary_index ?? event.content_index) ?? 0}`;
        // Only when nothing of this part was streamed (a server that sends the text only here).
        if (this.thinkingPart === `${index}:${part}`) return [];
        return this.item(index, "reasoning").streamed ? [] : this.think(index, part, str(event.text));
      }
      case "response.function_call_arguments.delta": {
        const item = this.item(index, "function_call");
        item.args += str(event.delta) ?? "";
        return [];
      }
      case "response.function_call_arguments.done": {
        const args = str(event.arguments);
        if (args !== undefined) this.item(index, "function_call").args = args;
        return [];
      }
      case "response.completed":
      case "response.incomplete":
        return this.end(event.type === "response.completed" ? "completed" : "incomplete", event.response);
      case "response.failed": {
        const response = isObject(event.response) ? event.response : {};
        throw failure(response.error, "the response failed");
      }
      case "error":
        throw failure(isObject(event.error) ? event.error : event, "error event in the stream");
      default:
        return [];
    }
  }

  /** A whole (non-streaming) `response` object; returns its text and thinking as deltas. */
  pushResponse(body: unknown): ModelEvent[] {
    const response = isObject(body) ? body : {};
    if (response.status === "failed" || (isObject(response.error) && response.status !== "completed")) {
      throw failure(response.error, "the response failed");
    }
    return this.end(response.status === "incomplete" ? "incomplete" : "completed", response);
  }

  /** True once `response.completed` or `response.incomplete` arrived. */
  get complete(): boolean {
    return this.status !== undefined;
  }

  /**
   * The output index of the item an event's `item_id` names, when one was announced with that id:
   * the latest such item, but for a `.done` event under an id several items have, the first of
   * them not done yet (llama.cpp sends every `.done` after the last item's deltas, in item order).
   */
  private named(itemId: unknown, type?: unknown): number | undefined {
    if (typeof itemId !== "string") return undefined;
    if (this.shared?.has(itemId) && typeof type === "string" && type.endsWith(".done")) {
      for (const [at, item] of [...this.items.entries()].sort((a, b) => a[0] - b[0]))
        if (item.kind === "function_call" && item.callId === itemId && !item.done) return at;
    }
    return this.ids?.get(itemId);
  }

  /** The output index of an announced item, found by its `id` (or a function call's `call_id`). */
  private itemIndex(raw: unknown, type?: unknown): number | undefined {
    if (!isObject(raw)) return undefined;
    return this.named(raw.id, type) ?? this.named(raw.call_id, type);
  }

  /** Lets events find the item at `index` by its id (llama.cpp's function call events name its `call_id`). */
  private name(raw: unknown, index: number): void {
    if (!isObject(raw)) return;
    this.ids ??= new Map();
    const ids = this.ids;
    const id = str(raw.id);
    if (id) ids.set(id, index);
    const callId = str(raw.call_id);
    if (callId && callId !== id) {
      if (ids.has(callId)) {
        this.shared ??= new Set();
        this.shared.add(callId);
      }
      ids.set(callId, index);
    }
  }

  /** The item at `index`, created as `kind` when a server skipped its `output_item.added`. */
  private item(index: number | undefined, kind: Item["kind"]): Item {
    const at = index ?? this.items.size - 1;
    let item = this.items.get(at);
    if (!item) {
      item = { kind, streamed: false, refusal: "", callId: "", name: "", args: "", done: false };
      this.items.set(at < 0 ? 0 : at, item);
    }
    return item;
  }

  private added(index: number, raw: unknown): ModelEvent[] {
    const it = isObject(raw) ? raw : {};
    const kind =
      it.type === "message" || it.type === "reasoning" || it.type === "function_call" ? it.type : "other";
    const item = this.item(index, kind);
    item.kind = kind;
    if (kind === "function_call") {
      item.callId = str(it.call_id) ?? item.callId;
      item.name = str(it.name) ?? item.name;
      item.args = str(it.arguments) ?? item.args;
    }
    return [];
  }

  private itemDone(index: number, raw: unknown): ModelEvent[] {
    const it = isObject(raw) ? raw : {};
    const item = this.item(index, "other");
    if (it.type === "message" || it.type === "reasoning" || it.type === "function_call") item.kind = it.type;
    item.done = true;
    const events: ModelEvent[] = [];
    if (item.kind === "function_call") {
      item.callId = str(it.call_id) || item.callId;
      item.name = str(it.name) || item.name;
      item.args = str(it.arguments) ?? item.args;
    } else if (item.kind === "message") {
      const parts = list(it.content);
      if (!item.streamed) {
        for (const p of parts)
          if (p.type === "output_text") events.push(...this.text(item, index, str(p.text)));
      }
      if (!item.refusal)
        item.refusal = parts.map((p) => (p.type === "refusal" ? (str(p.refusal) ?? "") : "")).join("");
    } else if (item.kind === "reasoning") {
      const summary = list(it.summary).map((p) => ({
        type: "summary_text" as const,
        text: str(p.text) ?? "",
      }));
      if (!item.streamed) {
        for (const [i, p] of summary.entries()) events.push(...this.think(index, `s${i}`, p.text));
        for (const [i, p] of list(it.content).entries())
          events.push(...this.think(index, `c${i}`, str(p.text)));
      }
      const encrypted = str(it.encrypted_content);
      if (encrypted) {
        const id = str(it.id);
        item.reasoning = { type: "reasoning", ...(id && { id }), summary, encrypted_content: encrypted };
      }
    }
    return events;
  }

  private text(item: Item, index: number, text: string | undefined): ModelEvent[] {
    if (!text) return [];
    item.streamed = true;
    const separator = this.messageWithText !== index && this.content !== "" ? "\n\n" : "";
    this.messageWithText = index;
    this.content += separator + text;
    return [{ type: "text_delta", text: separator + text }];
  }

  private think(index: number | undefined, part: string, text: string | undefined): ModelEvent[] {
    if (!text) return [];
    this.item(index, "reasoning").streamed = true;
    const key = `${index}:${part}`;
    const separator = this.thinkingPart !== key && this.thinking !== "" ? "\n\n" : "";
    this.thinkingPart = key;
    this.thinking += separator + text;
    return [{ type: "thinking_delta", text: separator + text }];
  }

  /** The end of the response: status, usage, and the output items never announced in the stream. */
  private end(status: "completed" | "incomplete", raw: unknown): ModelEvent[] {
    const response = isObject(raw) ? raw : {};
    this.status = status;
    const details = response.incomplete_details;
    if (status === "incomplete")
      this.reason = (isObject(details) ? str(details.reason) : undefined) ?? "incomplete";
    this.usage = mapUsage(response.usage) ?? this.usage;
    this.response = response;
    const events: ModelEvent[] = [];
    list(response.output).forEach((it, i) => {
      if (this.items.has(i) || this.itemIndex(it) !== undefined) return;
      this.added(i, it);
      events.push(...this.itemDone(i, it));
    });
    return events;
  }

  /** The assembled reply (call after the stream ended and `complete` is true). */
  reply(): ModelReply {
    const ordered = [...this.items.entries()].sort((a, b) => a[0] - b[0]).map(([, item]) => item);
    const toolCalls: ToolCall[] = [];
    const refs: OutputRef[] = [];
    for (const item of ordered) {
      if (item.kind === "function_call") {
        const call: ToolCall = {
          id: item.callId || `call_${toolCalls.length}`,
          name: item.name,
          arguments: item.args.trim() === "" ? "{}" : item.args,
        };
        if (this.status === "incomplete" && (!item.done || !isJson(call.arguments)))
          call.invalid = RESPONSES_CUT_OFF;
        toolCalls.push(call);
        refs.push({ type: "function_call", call_id: call.id });
      } else if (item.reasoning) refs.push(item.reasoning);
      else if (item.kind === "message") refs.push({ type: "message" });
    }
    const reply: ModelReply = {
      content: this.content,
      toolCalls,
      finishReason: this.reason ?? (toolCalls.length > 0 ? "tool_calls" : "stop"),
      usage: this.usage ?? { inputTokens: 0, outputTokens: 0 },
    };
    if (this.thinking) reply.thinking = this.thinking;
    const id = str(this.response?.id);
    if (id) reply.id = id;
    const model = str(this.response?.model);
    if (model) reply.model = model;
    const refusal = ordered.map((item) => item.refusal).join("");
    if (refusal) reply.refusal = refusal;
    if (refs.some((ref) => ref.type === "reasoning"))
      reply.providerData = { [RESPONSES_DATA_KEY]: { items: refs } };
    return reply;
  }
}
