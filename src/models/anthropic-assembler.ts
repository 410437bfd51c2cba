import { isJson, isObject } from "../core/json.js";
import { nestedTooDeep, type ToolCall, tooDeepMessage, type Usage } from "../core/messages.js";
import type { ModelEvent, ModelReply } from "./adapter.js";
import { ModelFailure } from "./model-errors.js";

/**
 * Assembles an Anthropic Messages event stream into a `ModelReply`. Pure: no I/O.
 *
 * Call `push(event)` with each parsed stream event (`message_start`, `content_block_start`,
 * `content_block_delta`, `content_block_stop`, `message_delta`, `message_stop`; anything else is
 * ignored); it returns the `text_delta` / `thinking_delta` events to emit. `complete` tells whether
 * the stream got to its end; `reply()` gives the result.
 *
 * - Text blocks concatenate into `content`; thinking blocks into `thinking`. `thinkingSignature`
 *   is the signature (`signature_delta`) of the thinking block when the reply has exactly one
 *   signed thinking block: only then can it be sent back unmodified, as Anthropic requires.
 *   `redacted_thinking` and server-tool blocks are not kept.
 * - A `tool_use` block's `arguments` is its `input_json_delta` pieces concatenated, `{}` when
 *   empty (or the start event's `input` serialised, when a server sends the whole input there).
 *   A block never closed, or with invalid JSON when `stop_reason` is `max_tokens`, gets
 *   `invalid` set, so the loop reports it to the model instead of executing it.
 * - Usage: `inputTokens` is the whole prompt (`input_tokens` + `cache_creation_input_tokens` +
 *   `cache_read_input_tokens`, as Anthropic defines the total), `cachedInputTokens` the cache
 *   reads, `outputTokens` the last (cumulative) `output_tokens`, `reasoningTokens`
 *   `output_tokens_details.thinking_tokens` when reported. `message_delta` counts override
 *   `message_start` ones (they are cumulative).
 *   With `usage.iterations` (server-side compaction, advisor, fallback), whose top-level counts
 *   leave the compaction pass out: `inputTokens` / `outputTokens` count every `compaction` and
 *   `message` iteration (the executor's, billed at this model's rates) instead of the top level,
 *   so nothing is counted twice; `advisor_message` iterations bill at the advisor model's rates
 *   and are left out; a turn served by a `fallback_message` keeps the top level, which is that
 *   answer's.
 * - `finishReason` is `stop_reason` as sent (`end_turn`, `tool_use`, `max_tokens`,
 *   `stop_sequence`, `pause_turn`, `refusal`, ...). With `refusal`, `refusal` is set to
 *   `stop_details.explanation`, else the text so far, else a generic line.
 * - A `message_start` of another message while one is open (no `message_stop` yet) fails the
 *   stream (`ModelFailure` "invalid_response"): two messages are never merged. A repeated
 *   `message_start` of the open message is ignored.
 */

interface Block {
  kind: "text" | "thinking" | "tool_use" | "other";
  text: string;
  signature: string;
  id: string;
  name: string;
  /** The start event's `input` as JSON, used when no `input_json_delta` carries any text. */
  startInput: string;
  /** The start event's `input` was nested too deep to serialise. */
  tooDeep: boolean;
  closed: boolean;
}

const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);
const num = (v: unknown): number | undefined => (typeof v === "number" && Number.isFinite(v) ? v : undefined);

export const CUT_OFF_REASON =
  "The reply was cut off (max_tokens) before this tool call's arguments were complete; ask for less at once or raise max tokens.";
export const UNCLOSED_REASON =
  "The reply ended before this tool call's arguments were complete (its tool_use block was never closed).";

export class AnthropicStreamAssembler {
  /** Blocks in order of their `index` (content_block_start order, which is index order). */
  private readonly blocks = new Map<number, Block>();
  private stopReason: string | undefined;
  private explanation: string | undefined;
  /** The id of the open message (`message_start` seen, `message_stop` not yet), when one is open. */
  private open: string | undefined;
  /** The message id and model `message_start` named. */
  private id: string | undefined;
  private model: string | undefined;
  private stopped = false;
  private input = 0;
  private cacheCreation = 0;
  private cacheRead: number | undefined;
  private output = 0;
  private thinkingTokens: number | undefined;

  /** Feeds one parsed stream event; returns the delta events it produced, in order. */
  push(event: unknown): ModelEvent[] {
    if (!isObject(event)) return [];
    switch (event.type) {
      case "message_start": {
        const message = isObject(event.message) ? event.message : {};
        const id = str(message.id) ?? "";
        if (this.open !== undefined) {
          if (id === this.open) return []; // the same message announced twice
          throw new ModelFailure(
            "invalid_response",
            `Model API stream started message '${id || "(no id)"}' while '${this.open || "(no id)"}' was still open`,
            true,
          );
        }
        this.open = id;
        this.id = id || undefined;
        this.model = str(message.model);
        this.addUsage(message.usage);
        return [];
      }
      case "content_block_start":
        return this.start(num(event.index) ?? this.blocks.size, event.content_block);
      case "content_block_delta":
        return this.delta(num(event.index), event.delta);
      case "content_block_stop": {
        const block = this.blocks.get(num(event.index) ?? -1);
        if (block) block.closed = true;
        return [];
      }
      case "message_delta":
        if (isObject(event.delta)) {
          this.stopReason = str(event.delta.stop_reason) ?? this.stopReason;
          const details = event.delta.stop_details;
          if (isObject(details)) this.explanation = str(details.explanation) ?? this.explanation;
        }
        this.addUsage(event.usage);
        return [];
      case "message_stop":
        this.stopped = true;
        this.open = undefined;
        return [];
      default:
        return [];
    }
  }

  /**
   * True once `message_stop` arrived, or a `message_delta` carried the `stop_reason` (all that
   * `message_stop` would confirm). The SDK's SSE parser drops a last event not followed by a blank
   * line, as the SSE spec says, so a body that ends `data: {"type":"message_stop"}` without `\n\n`
   * never yields it; a stream that breaks makes the SDK throw instead.
   */
  get complete(): boolean {
    return this.stopped || this.stopReason !== undefined;
  }

  private start(index: number, raw: unknown): ModelEvent[] {
    const cb = isObject(raw) ? raw : {};
    const kind = cb.type === "text" || cb.type === "thinking" || cb.type === "tool_use" ? cb.type : "other";
    const whole = isObject(cb.input) && Object.keys(cb.input).length > 0;
    const tooDeep = whole && nestedTooDeep(cb.input);
    const input = whole && !tooDeep ? JSON.stringify(cb.input) : "";
    const block: Block = {
      kind,
      text: "",
      signature: str(cb.signature) ?? "",
      id: str(cb.id) ?? "",
      name: str(cb.name) ?? "",
      startInput: input,
      tooDeep,
      closed: false,
    };
    this.blocks.set(index, block);
    // Real streams start text and thinking blocks empty; a non-empty start is content too.
    if (kind === "text") return this.append(block, "text_delta", str(cb.text));
    if (kind === "thinking") return this.append(block, "thinking_delta", str(cb.thinking));
    return [];
  }

  private delta(index: number | undefined, raw: unknown): ModelEvent[] {
    const block = index === undefined ? undefined : this.blocks.get(index);
    if (!block || !isObject(raw)) return [];
    switch (raw.type) {
      case "text_delta":
        return block.kind === "text" ? this.append(block, "text_delta", str(raw.text)) : [];
      case "thinking_delta":
        return block.kind === "thinking" ? this.append(block, "thinking_delta", str(raw.thinking)) : [];
      case "signature_delta":
        block.signature += str(raw.signature) ?? "";
        return [];
      case "input_json_delta":
        if (block.kind === "tool_use") block.text += str(raw.partial_json) ?? "";
        return [];
      default:
        return [];
    }
  }

  private append(
    block: Block,
    type: "text_delta" | "thinking_delta",
    text: string | undefined,
  ): ModelEvent[] {
    if (!text) return [];
    block.text += text;
    return [{ type, text }];
  }

  private addUsage(raw: unknown): void {
    if (!isObject(raw)) return;
    const executor = executorTotals(raw.iterations);
    this.input = executor?.input ?? num(raw.input_tokens) ?? this.input;
    this.cacheCreation = num(raw.cache_creation_input_tokens) ?? this.cacheCreation;
    this.cacheRead = num(raw.cache_read_input_tokens) ?? this.cacheRead;
    this.output = executor?.output ?? num(raw.output_tokens) ?? this.output;
    const details = raw.output_tokens_details;
    if (isObject(details)) this.thinkingTokens = num(details.thinking_tokens) ?? this.thinkingTokens;
  }

  /** A tool_use block as a call; one without an id gets `toolu_<n>` (n = its position). */
  private toolCall(block: Block, position: number): ToolCall {
    const args = block.text.trim() ? block.text : block.startInput || "{}";
    const call: ToolCall = { id: block.id || `toolu_${position}`, name: block.name, arguments: args };
    if (block.tooDeep && !block.text.trim()) call.invalid = tooDeepMessage(call.name);
    else if (this.stopReason === "max_tokens" && (!block.closed || !isJson(args)))
      call.invalid = CUT_OFF_REASON;
    else if (!block.closed) call.invalid = UNCLOSED_REASON;
    return call;
  }

  /** The assembled reply so far (call after the stream ended and `complete` is true). */
  reply(): ModelReply {
    const ordered = [...this.blocks.entries()].sort((a, b) => a[0] - b[0]).map(([, b]) => b);
    const thinkingBlocks = ordered.filter((b) => b.kind === "thinking");
    const toolCalls = ordered.filter((b) => b.kind === "tool_use").map((b, i) => this.toolCall(b, i));
    const usage: Usage = {
      inputTokens: this.input + this.cacheCreation + (this.cacheRead ?? 0),
      outputTokens: this.output,
    };
    if (this.cacheRead !== undefined) usage.cachedInputTokens = this.cacheRead;
    if (this.thinkingTokens !== undefined) usage.reasoningTokens = this.thinkingTokens;
    const reply: ModelReply = {
      content: ordered.map((b) => (b.kind === "text" ? b.text : "")).join(""),
      toolCalls,
      finishReason: this.stopReason ?? (toolCalls.length > 0 ? "tool_use" : "end_turn"),
      usage,
    };
    const thinking = thinkingBlocks.map((b) => b.text).join("");
    if (thinking) reply.thinking = thinking;
    if (this.id) reply.id = this.id;
    if (this.model) reply.model = this.model;
    if (this.stopReason === "refusal") {
      reply.refusal =
        this.explanation || reply.content || "The model declined to answer (stop_reason: refusal).";
    }
    const signed = thinkingBlocks.filter((b) => b.signature);
    if (thinkingBlocks.length === 1 && signed[0]) reply.thinkingSignature = signed[0].signature;
    return reply;
  }
}

/**
 * The input and output tokens of the executor's iterations (`compaction` and `message`) when
 * `usage.iterations` lists them and no `fallback_message` served the turn; else `undefined` (the
 * top-level counts stand).
 */
function executorTotals(iterations: unknown): { input: number; output: number } | undefined {
  if (!Array.isArray(iterations)) return undefined;
  let input = 0;
  let output = 0;
  let counted = false;
  for (const it of iterations) {
    if (!isObject(it)) continue;
    if (it.type === "fallback_message") return undefined;
    if (it.type !== "compaction" && it.type !== "message") continue;
    input += num(it.input_tokens) ?? 0;
    output += num(it.output_tokens) ?? 0;
    counted = true;
  }
  return counted ? { input, output } : undefined;
}
