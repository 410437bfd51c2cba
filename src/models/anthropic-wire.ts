import type Anthropic from "@anthropic-ai/sdk";
import { type Message, nestedTooDeep, type ToolCall, type ToolMessage } from "../core/messages.js";
import type { ModelRequest, ToolSpec } from "./adapter.js";
import {
  type AnthropicStructuredOutput,
  defaultStructuredOutput,
  mediaBlock,
  outputFormat,
  resultContent,
} from "./anthropic-parts.js";

/**
 * Request mapping of the Anthropic adapter, pure (no I/O): runtime messages to Anthropic messages
 * (`toAnthropicMessages`) and a request to a Messages body (`toAnthropicRequestBody`). The streamed
 * reply is assembled in `anthropic-assembler.ts`.
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

/** A request's `toolChoice` and `parallelToolCalls` as Anthropic's `tool_choice`. */
function anthropicChoice(request: ModelRequest): Record<string, unknown> {
  const choice = request.toolChoice;
  const type = choice === "required" ? "any" : typeof choice === "object" ? "tool" : "auto";
  return {
    type,
    ...(typeof choice === "object" && { name: choice.name }),
    ...(request.parallelToolCalls === false && { disable_parallel_tool_use: true }),
  };
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
    ...(mechanism === "tool"
      ? { tool_choice: { type: budget === undefined ? "any" : "auto" } }
      : tools.length > 0 && request.toolChoice !== undefined && { tool_choice: anthropicChoice(request) }),
    ...(budget === undefined ? {} : { thinking: { type: "enabled", budget_tokens: budget } }),
    ...(output && mechanism === "native" && { output_config: { format: outputFormat(output.schema) } }),
    ...options.extraBody,
    stream: true,
  };
}
