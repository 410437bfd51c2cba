/**
 * The runtime's provider-neutral conversation. Adapters translate it to and from their
 * wire format; the loop only appends to it.
 */

/** A tool call as the model requested it. `arguments` is the raw JSON text, unparsed. */
export interface ToolCall {
  id: string;
  name: string;
  arguments: string;
  /**
   * Set when the model's output could not be read as a well-formed call (e.g. a malformed
   * XML tool block): the reason, which goes back to the model as the call's error result.
   */
  invalid?: string;
}

export interface UserMessage {
  role: "user";
  content: string;
}

export interface AssistantMessage {
  role: "assistant";
  /** The visible text of the reply ("" when the model only called tools). */
  content: string;
  /** Reasoning text the provider streamed, when it did. Never sent back unless the provider requires it. */
  thinking?: string;
  /** The provider's signature of `thinking` (Anthropic), sent back with it as the provider requires. */
  thinkingSignature?: string;
  toolCalls?: ToolCall[];
}

/** The result of one tool call; `toolCallId` ties it to its call. */
export interface ToolMessage {
  role: "tool";
  toolCallId: string;
  name: string;
  content: string;
  isError: boolean;
}

/** History never holds the system prompt: the loop assembles it for every request. */
export type Message = UserMessage | AssistantMessage | ToolMessage;

export interface Usage {
  inputTokens: number;
  outputTokens: number;
  /** Input tokens served from the provider's prompt cache, when reported. */
  cachedInputTokens?: number;
  /** Output tokens spent on reasoning, when reported. */
  reasoningTokens?: number;
  /** Cost in USD, when the model's price is known. */
  costUsd?: number;
}

export function emptyUsage(): Usage {
  return { inputTokens: 0, outputTokens: 0 };
}

/** Adds `b` into `a` in place (the run's running total). */
export function addUsage(a: Usage, b: Usage): void {
  a.inputTokens += b.inputTokens;
  a.outputTokens += b.outputTokens;
  if (b.cachedInputTokens !== undefined)
    a.cachedInputTokens = (a.cachedInputTokens ?? 0) + b.cachedInputTokens;
  if (b.reasoningTokens !== undefined) a.reasoningTokens = (a.reasoningTokens ?? 0) + b.reasoningTokens;
  if (b.costUsd !== undefined) a.costUsd = (a.costUsd ?? 0) + b.costUsd;
}
