import type { Message, ToolCall, Usage } from "../core/messages.js";
import type { AttemptObserver } from "./attempts.js";
import type { ModelPrice } from "./pricing.js";

/** A tool as the model sees it: a name, a description and a JSON Schema for its arguments. */
export interface ToolSpec {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
}

export interface ModelRequest {
  /** The assembled system prompt ("" for none). */
  system: string;
  messages: readonly Message[];
  /** Tools offered with native function calling, in a fixed order. Empty for none. */
  tools: readonly ToolSpec[];
  /**
   * Structured output: the final answer (a reply without tool calls) must be one JSON object valid
   * against `schema` (whose root is an object). Set only for a model with `structuredOutput`, which
   * maps it to its provider's mechanism (OpenAI `response_format` json_schema, Anthropic
   * `output_config.format` or a forced tool); the loop validates the answer either way.
   */
  output?: { name: string; schema: Record<string, unknown> };
  /** Which tool calls this reply must make (the provider's `tool_choice`); absent: the provider's default ("auto"). */
  toolChoice?: ToolChoice;
  /** Whether the reply may make several tool calls (the provider's `parallel_tool_calls`); absent: its default. */
  parallelToolCalls?: boolean;
}

/** Which tool calls a model call must make: any or none ("auto"), at least one ("required"), or one of that tool. */
export type ToolChoice = "auto" | "required" | { name: string };

/**
 * What a model call streams. Deltas first, then exactly one terminal event: `done` with the
 * assembled reply, or `error`.
 */
export type ModelEvent =
  | { type: "text_delta"; text: string }
  | { type: "thinking_delta"; text: string }
  | { type: "done"; message: ModelReply }
  | { type: "error"; error: ModelError };

export interface ModelReply {
  content: string;
  thinking?: string;
  /** The provider's signature of the thinking, when it sends one (Anthropic). */
  thinkingSignature?: string;
  toolCalls: ToolCall[];
  /**
   * Set when the model declined to answer: the refusal text (OpenAI's `refusal`; for Anthropic's
   * `stop_reason: "refusal"`, its `stop_details.explanation`, else the text so far, else a generic
   * line). `content` then holds only answer text, often none.
   */
  refusal?: string;
  /** Opaque data for the adapter's next request, kept on the assistant message (see `AssistantMessage.providerData`). */
  providerData?: Record<string, unknown>;
  /** The provider's finish reason as sent ("stop", "tool_calls", "length", ...). */
  finishReason: string;
  usage: Usage;
  /** The provider's id of the response, when it sends one (`chatcmpl-...`, `msg_...`, `resp_...`). */
  id?: string;
  /** The model that answered, as the provider names it (e.g. `gpt-4o-mini-2024-07-18`), when it says. */
  model?: string;
}

/**
 * Why a reply was cut short, read from its finish reason: "length" for the output token limit
 * (Chat Completions `length`, Responses `max_output_tokens`, Anthropic `max_tokens` or
 * `model_context_window_exceeded`), "content_filter" for the provider's filter; undefined for a
 * complete reply.
 */
export function incompleteReason(finishReason: string): "length" | "content_filter" | undefined {
  switch (finishReason) {
    case "length":
    case "max_tokens":
    case "max_output_tokens":
    case "model_context_window_exceeded":
      return "length";
    case "content_filter":
      return "content_filter";
    default:
      return undefined;
  }
}

export interface ModelError {
  /** One line; never contains an API key or an Authorization header. */
  message: string;
  /** "aborted" when the signal fired; else e.g. "http_500", "connection", "invalid_response". */
  code: string;
  /** HTTP status when there was one. */
  status?: number;
}

/**
 * A model provider behind one small interface.
 *
 * Contract: `stream` never throws and its iterator never rejects. Transport errors,
 * provider errors, retries exhausted and aborts all end the stream with one `error` event.
 * Retries of failed requests happen inside the adapter.
 */
export interface Model {
  /** The model id sent to the provider, e.g. "gpt-4o-mini". */
  readonly id: string;
  /**
   * The adapter's own price of the model, when it knows better than the built-in table: `FREE`
   * for an endpoint on this machine or a private network. The Agent's `prices` override it.
   */
  readonly price?: ModelPrice;
  /**
   * True when the adapter constrains the answer to `ModelRequest.output` through its provider. For
   * other models the loop describes the schema in the system prompt instead (and sends no `output`).
   */
  readonly structuredOutput?: boolean;
  /**
   * The provider as the GenAI semantic conventions name it (`gen_ai.provider.name`: "openai",
   * "azure.ai.openai", "anthropic"), for traces.
   */
  readonly provider?: string;
  /** The base URL requests go to, for traces (`server.address`, `server.port`). */
  readonly baseURL?: string;
  /**
   * The same model sending its HTTP requests through `fetch` (agentloop's adapters have it; a model
   * brought with its own `client` does not): how an agent's `record` option records at the HTTP boundary.
   */
  withFetch?(fetch: typeof globalThis.fetch): Model;
  /**
   * `attempts`, when given, is told of each HTTP request the call sends, retries included (adapters
   * that send none need not call it).
   */
  stream(
    request: ModelRequest,
    options: { signal?: AbortSignal; attempts?: AttemptObserver | undefined },
  ): AsyncIterable<ModelEvent>;
}
