import type { ModelError, ModelEvent, ModelReply } from "./adapter.js";
import type { ModelErrorContext, ModelFailure } from "./model-errors.js";

/**
 * What the streaming request loop of `guardRequest` needs from an adapter: one attempt reads the
 * stream through the protocol's assembler under the idle timer; a stream that breaks off is
 * requested again from scratch, with backoff, as the adapter's `retryPartialStreams` /
 * `maxRetries` say.
 */

/**
 * An adapter's `maxRetries` when none is given: how many times a failed request (a 429, a 5xx, a
 * lost connection) is sent again, and how many times a broken stream is requested again.
 */
export const DEFAULT_MAX_RETRIES = 3;

/** What the SDK's `create(params, options).withResponse()` gives for a streaming request. */
export interface OpenedStream {
  /** The parsed stream events; `controller` (the SDKs' `Stream` has one) cancels the body. */
  data: AsyncIterable<unknown> & { controller?: AbortController };
  response: Response;
}

/** A wire protocol's stream assembler (`ChatStreamAssembler`, `AnthropicStreamAssembler`). */
interface StreamAssembly {
  /** Takes one parsed stream event; returns the `text_delta` / `thinking_delta` events to yield. */
  push(event: unknown): ModelEvent[];
  /** True once the stream reached its end (a finish reason, or `message_stop`). */
  readonly complete: boolean;
  reply(): ModelReply;
}

export interface StreamAttempts {
  /** Sends the request with the guard's signal; resolves once the response headers arrived. */
  open(): Promise<OpenedStream>;
  /** A fresh assembler, one per attempt. */
  assembler(): StreamAssembly;
  /** The failure of a stream that ended quietly before it was complete, after `received` events. */
  endedEarly(received: number, contentType: string): ModelFailure;
  /** How many times a broken stream is requested again. */
  retries: number;
  /** Also request it again when deltas were already yielded (they may then be yielded twice). */
  retryPartial: boolean;
  /** The adapter's classification of anything thrown. */
  toError(error: unknown, ctx: ModelErrorContext): ModelError;
  /** The events that end a complete stream; default: one `done` with the assembled reply. */
  finish?(reply: ModelReply): ModelEvent[];
}

/** Whether a request's plan is a streaming one (else it is its events). */
export function isStreamAttempts(plan: unknown): plan is StreamAttempts {
  return typeof (plan as Partial<StreamAttempts>).open === "function";
}

/** Waits `ms`, or less when `signal` fires. */
export function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const end = () => {
      clearTimeout(timer);
      signal.removeEventListener("abort", end);
      resolve();
    };
    const timer = setTimeout(end, ms);
    signal.addEventListener("abort", end, { once: true });
  });
}

/** Backoff before requesting a broken stream again: 250 ms doubling up to 4 s, minus up to 25% jitter. */
export const streamRetryDelay = (attempt: number) =>
  Math.min(250 * 2 ** attempt, 4000) * (1 - Math.random() * 0.25);
