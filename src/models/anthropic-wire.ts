import type Anthropic from "@anthropic-ai/sdk";
import { isObject } from "../core/json.js";
import {
  type Message,
  nestedTooDeep,
  type ToolCall,
  type ToolMessage,
  tooDeepMessage,
  type Usage,
} from "../core/messages.js";
import type { ModelEvent, ModelReply, ModelRequest, ToolSpec } from "./adapter.js";
import {
  type AnthropicStructuredOutput,
  defaultStructuredOutput,
  mediaBlock,
  outputFormat,
  resultContent,
} from "./anthropic-parts.js";
import { ModelFailure } from "./model-errors.js";

/**
 * The Anthropic Messages wire format both ways, pure (no I/O): runtime messages to a request body
 * (`toAnthropicMessages`, `toAnthropicRequestBody`), and a streamed reply back to a `ModelReply`
 * (`AnthropicStreamAssembler`).
 */

const DEFAULT_MAX_TOKENS = 4096;

type WireBlock =
  | Anthropic.TextBlockParam
  | Anthropic.ImageBlockParam
  | Anthropic.ThinkingBlockParam
  | Anthropic.ToolUseBlockParam
  | Anthropic.ToolResultBlockParam;
export interface WireMessage {
  role: "user" | "assistant";
  content: WireBlock[];
}

/** Parsed tool-call arguments when they are a JSON object (not nested too deep to send), else `{}`. */
function inputObject(args: string): Record<string, unknown> {
  if (nestedTooDeep(args)) return {};
  try {
    const value: unknown = JSON.parse(args);
    return typeof value === "object" && value !== null && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : {};
  } catch {
    return {};
  }
}

const hasText = (text: string): boolean => text.trim() !== "";
const isResult = (b: WireBlock): boolean => b.type === "tool_result";

/**
 * What a request reuses from the requests before it (one per adapter): a message never changes
 * once it is in a history (the loop only appends), so each one is mapped once; a tool list likewise.
 */
export interface AnthropicWireCache {
  messages: WeakMap<Message, WireMessage>;
  tools: WeakMap<readonly ToolSpec[], Anthropic.Tool[]>;
}

export const anthropicWireCache = (): AnthropicWireCache => ({
  messages: new WeakMap(),
  tools: new WeakMap(),
});

/** One runtime message alone (see `toAnthropicMessages`); a tool result is a user message of one `tool_result` block. */
function wireMessage(m: Message): WireMessage {
  if (m.role === "user") {
    const blocks: WireBlock[] = (m.media ?? []).map(mediaBlock);
    if (hasText(m.content)) blocks.push({ type: "text", text: m.content });
    return { role: "user", content: blocks };
  }
  if (m.role === "assistant") {
    const blocks: WireBlock[] = [];
    if (m.thinkingSignature)
      blocks.push({ type: "thinking", thinking: m.thinking ?? "", signature: m.thinkingSignature });
    if (hasText(m.content)) blocks.push({ type: "text", text: m.content });
    for (const c of m.toolCalls ?? [])
      blocks.push({
        type: "tool_use",
        id: c.id,
        name: c.name,
        input: c.invalid ? {} : inputObject(c.arguments),
      });
    return { role: "assistant", content: blocks };
  }
  const content = resultContent(m);
  const block: WireBlock = {
    type: "tool_result",
    tool_use_id: m.toolCallId,
    ...(content ? { content } : {}),
    ...(m.isError ? { is_error: true } : {}),
  };
  return { role: "user", content: [block] };
}

/**
 * Maps the runtime messages to Anthropic messages, whose roles must alternate:
 * - user -> its images (`image` blocks, before the text, as Anthropic advises), then a text block; assistant -> its thinking block (only with a signature: Anthropic
 *   rejects unsigned thinking), then its text, then one `tool_use` block per call (`input` = the
 *   parsed arguments, `{}` when invalid); an assistant message with nothing to send is dropped;
 * - tool results -> `tool_result` blocks (`is_error` when failed; a result with images has its
 *   text and `image` blocks as content, audio as a note); the results that follow an
 *   assistant message go in the order of its calls;
 * - consecutive messages of one role are merged into one message (a notice after the tool results
 *   joins their user message as a text block); in a user message `tool_result` blocks come first,
 *   as Anthropic requires. Empty or whitespace-only text blocks are never sent.
 * With a `cache`, messages mapped before are reused (and never modified: a merge makes a new message).
 */
export function toAnthropicMessages(messages: readonly Message[], cache?: AnthropicWireCache): WireMessage[] {
  const out: WireMessage[] = [];
  /** Whether the last message of `out` was made here (a merge may extend it), not taken from the cache. */
  let owned = false;
  const add = (wire: WireMessage, fresh: boolean) => {
    if (wire.content.length === 0) return;
    let last = out.at(-1);
    if (last?.role !== wire.role) {
      out.push(wire);
      owned = fresh;
      return;
    }
    if (!owned) {
      last = { role: last.role, content: [...last.content] };
      out[out.length - 1] = last;
      owned = true;
    }
    last.content.push(...wire.content);
    // In a user message `tool_result` blocks come first.
    if (wire.role === "user" && wire.content.some(isResult)) {
      last.content = [...last.content.filter(isResult), ...last.content.filter((b) => !isResult(b))];
    }
  };
  const wireOf = (m: Message): WireMessage => {
    let wire = cache?.messages.get(m);
    if (!wire) {
      wire = wireMessage(m);
      cache?.messages.set(m, wire);
    }
    return wire;
  };
  let calls: readonly ToolCall[] = [];
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i] as Message;
    if (m.role === "assistant") calls = m.toolCalls ?? [];
    if (m.role !== "tool" || messages[i + 1]?.role !== "tool") {
      add(wireOf(m), false);
      continue;
    }
    // A run of results, sorted (stably) into the order of the calls they answer.
    const run: ToolMessage[] = [];
    for (; i < messages.length && messages[i]?.role === "tool"; i++) run.push(messages[i] as ToolMessage);
    i--;
    const rank = (t: ToolMessage) => {
      const index = calls.findIndex((c) => c.id === t.toolCallId);
      return index < 0 ? Number.MAX_SAFE_INTEGER : index;
    };
    run.sort((a, b) => rank(a) - rank(b));
    add({ role: "user", content: run.flatMap((t) => wireOf(t).content) }, true);
  }
  return out;
}

/**
 * The request body: model, max_tokens, system (omitted when empty), messages, tools (omitted when
 * empty; with `structuredOutput: "tool"` the output tool last, and `tool_choice`), thinking,
 * `output_config` (with the default, native structured output), then `extraBody`.
 */
export function toAnthropicRequestBody(
  request: ModelRequest,
  options: {
    model: string;
    maxTokens?: number;
    thinking?: { budgetTokens: number };
    extraBody?: Record<string, unknown>;
    structuredOutput?: AnthropicStructuredOutput;
    /** The adapter's `anthropicWireCache()`: messages and tool lists mapped by earlier requests are reused. */
    cache?: AnthropicWireCache;
  },
): Record<string, unknown> {
  const budget = options.thinking?.budgetTokens;
  let tools = options.cache?.tools.get(request.tools);
  if (!tools) {
    tools = request.tools.map((t) => ({
      name: t.name,
      ...(t.description ? { description: t.description } : {}),
      input_schema: { type: "object", ...t.parameters } as Anthropic.Tool.InputSchema,
    }));
    options.cache?.tools.set(request.tools, tools);
  }
  const { output } = request;
  const mechanism = output && (options.structuredOutput ?? defaultStructuredOutput(options.model));
  if (output && mechanism === "tool") {
    tools = [...tools];
    tools.push({
      name: output.name,
      description:
        "Give your final answer by calling this tool, once the task is done; its input is the answer.",
      input_schema: output.schema as Anthropic.Tool.InputSchema,
    });
  }
  return {
    model: options.model,
    max_tokens:
      options.maxTokens ?? (budget === undefined ? DEFAULT_MAX_TOKENS : budget + DEFAULT_MAX_TOKENS),
    ...(hasText(request.system) ? { system: request.system } : {}),
    messages: toAnthropicMessages(request.messages, options.cache),
    ...(tools.length > 0 ? { tools } : {}),
    ...(mechanism === "tool" && { tool_choice: { type: budget === undefined ? "any" : "auto" } }),
    ...(budget === undefined ? {} : { thinking: { type: "enabled", budget_tokens: budget } }),
    ...(output && mechanism === "native" && { output_config: { format: outputFormat(output.schema) } }),
    ...options.extraBody,
    stream: true,
  };
}

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

function isJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}
