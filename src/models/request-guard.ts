import type { ModelError, ModelEvent } from "./adapter.js";
import { type AttemptObserver, withAttempts } from "./attempts.js";
import {
  htmlTitle,
  isHtml,
  isRetryableStreamFailure,
  type ModelErrorContext,
  ModelFailure,
  modelError,
} from "./model-errors.js";
import { isStreamAttempts, pause, type StreamAttempts, streamRetryDelay } from "./stream-retry.js";

/**
 * The per-call plumbing both adapters share: their own AbortController wired to the caller's
 * signal, the idle timer between streamed chunks, the secrets kept out of error messages, and the
 * errors of a client that cannot be constructed.
 */

/**
 * The longest wait for any byte of a streaming request when `timeoutMs` is not set: for the
 * response headers (per request: each one the client retries waits as long again) and between
 * two streamed chunks.
 */
export const DEFAULT_IDLE_TIMEOUT_MS = 120_000;

/** What `guardRequest` needs from the adapter's options. */
export interface GuardOptions {
  /** The API key and any other credentials in use: never in a message. */
  credentials: readonly (string | null | undefined)[];
  /** The extra headers sent: the values of those whose name looks like a credential never appear either. */
  headers?: Record<string, string>;
  /**
   * The wait for the response headers, per request (the SDK's `timeout`; unset: the client's
   * default), and the idle timeout between chunks (unset: `DEFAULT_IDLE_TIMEOUT_MS`). Streaming
   * adapters pass `timeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS`, so a server that never answers is not
   * waited for longer than a silent stream.
   */
  timeoutMs?: number;
  /** Told of each HTTP request of a streaming call, retries included (the call's `attempts`). */
  attempts?: AttemptObserver | undefined;
}

/** A fresh error context: nothing happened yet; the secrets as `GuardOptions` says. */
function errorContext({ credentials, headers, timeoutMs }: GuardOptions): ModelErrorContext {
  const secrets = [
    ...credentials,
    ...Object.entries(headers ?? {})
      .filter(([name]) => /auth|key|token|secret|cookie/i.test(name))
      .map(([, value]) => value),
  ];
  const idleTimeoutMs = timeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS;
  return { aborted: false, idleTimedOut: false, streaming: false, timeoutMs, idleTimeoutMs, secrets };
}

/** One model call's abort and idle-timer state; see `guardRequest`. */
export interface RequestGuard {
  /** Pass to the SDK: fires on the caller's abort, on the idle timeout, and when the call ends early. */
  readonly signal: AbortSignal;
  /** What the classification needs to know; add the secrets only known later (the client's key). */
  readonly ctx: ModelErrorContext;
  /** (Re)starts the idle timer: when it runs out, `ctx.idleTimedOut` is set and `signal` fires. Cheap: call it per chunk. */
  arm(): void;
  /** Stops the idle timer (while the consumer works, and once the stream ended). */
  disarm(): void;
  /**
   * The response was read to its end (the terminal event is next): the call then ends without
   * firing `signal`, as there is no connection to release.
   */
  end(): void;
  /** Throws when `signal` fired: classified as `timeout` after the idle timer, else `aborted`. */
  throwIfAborted(): void;
}

const aborted = () => new ModelFailure("aborted", "Model request aborted");

/**
 * Runs `body` under a `RequestGuard` and makes the adapter contract hold whatever it does: a
 * caller's signal that already fired yields one `aborted` error without calling `body`; anything
 * `body` throws becomes one `error` event (classified by `toError` with the guard's context); on
 * every exit, the consumer's early `return()` included, the timer is stopped, the listener on the
 * caller's signal removed and, unless the response was read to its end (`end()`), the guard's
 * signal fired, which releases the connection.
 *
 * `body` gives the request's events, or for a streaming request its `StreamAttempts`, read here
 * (one generator between the SDK's stream and the caller, not two): the deltas as they arrive,
 * then exactly one `done` (the assembled reply) or `error`. A failure `isRetryableStreamFailure`
 * accepts (the stream broke or ended before it was complete, or brought a transient error event
 * such as `overloaded_error`, as the SDKs retry that status over HTTP) is retried from scratch
 * up to `retries` times when no delta was yielded yet, or always with `retryPartial`, unless it is
 * a final `ModelFailure`. A 200 answer with an HTML content type is an `invalid_response` named by
 * the page's title. The idle timer runs only while waiting for the next event, never while the
 * consumer works.
 */
export async function* guardRequest(
  signal: AbortSignal | undefined,
  options: GuardOptions,
  toError: (error: unknown, ctx: ModelErrorContext) => ModelError,
  body: (guard: RequestGuard) => AsyncIterable<ModelEvent> | Iterable<ModelEvent> | StreamAttempts,
): AsyncGenerator<ModelEvent> {
  const ctx = errorContext(options);
  if (signal?.aborted) {
    yield { type: "error", error: toError(aborted(), { ...ctx, aborted: true }) };
    return;
  }
  const controller = new AbortController();
  const onAbort = () => {
    ctx.aborted = true;
    controller.abort();
  };
  signal?.addEventListener("abort", onAbort, { once: true });
  let idle: ReturnType<typeof setTimeout> | undefined;
  const onIdle = () => {
    ctx.idleTimedOut = true;
    controller.abort();
  };
  let ended = false;
  const guard: RequestGuard = {
    signal: controller.signal,
    ctx,
    // One timer per wait, restarted per chunk: `refresh()` moves it without a new timer.
    arm: () => {
      if (idle) idle.refresh();
      else idle = setTimeout(onIdle, ctx.idleTimeoutMs);
    },
    disarm: () => {
      clearTimeout(idle);
      idle = undefined;
    },
    end: () => {
      ended = true;
    },
    throwIfAborted: () => {
      if (controller.signal.aborted) throw aborted();
    },
  };
  try {
    const plan = body(guard);
    if (!isStreamAttempts(plan)) {
      yield* plan;
      return;
    }
    for (let attempt = 0; ; attempt++) {
      let emitted = false;
      try {
        guard.throwIfAborted();
        ctx.streaming = false;
        const { data, response } = await withAttempts(options.attempts, () => plan.open());
        ctx.streaming = true;
        const type = response.headers.get("content-type") ?? "";
        if (isHtml("", type)) {
          // The SSE parser would skip every line of it; read the page to name it instead.
          const page = await response.text().catch(() => "");
          data.controller?.abort();
          throw new ModelFailure(
            "invalid_response",
            `Model API answered a streaming request with an HTML page (${htmlTitle(page) ?? "no title"}) instead of an event stream, probably from a proxy or a wrong base URL`,
          );
        }
        const assembler = plan.assembler();
        let received = 0;
        guard.arm();
        for await (const event of data) {
          received++;
          const deltas = assembler.push(event);
          if (deltas.length > 0) {
            guard.disarm();
            emitted = true;
            for (const delta of deltas) yield delta;
          }
          guard.arm();
        }
        guard.disarm();
        // The SDKs end the iteration quietly (no throw) when their signal fires mid-stream.
        guard.throwIfAborted();
        if (assembler.complete) {
          guard.end();
          const reply = assembler.reply();
          if (plan.finish) yield* plan.finish(reply);
          else yield { type: "done", message: reply };
          return;
        }
        throw plan.endedEarly(received, type);
      } catch (error) {
        guard.disarm();
        const failure = plan.toError(error, ctx);
        const retry =
          isRetryableStreamFailure(failure) &&
          !(error instanceof ModelFailure && error.final) &&
          attempt < plan.retries &&
          (!emitted || plan.retryPartial);
        if (!retry) {
          yield { type: "error", error: failure };
          return;
        }
        // The stream of a request that answered broke off: that request failed, another follows.
        options.attempts?.attemptFailed(failure.code, failure.message);
      }
      await pause(streamRetryDelay(attempt), guard.signal);
    }
  } catch (error) {
    yield { type: "error", error: toError(error, ctx) };
  } finally {
    guard.disarm();
    signal?.removeEventListener("abort", onAbort);
    // Releases the connection when the consumer stopped early or the call failed; a response read
    // to its end has nothing to release, and an abort costs a DOMException and the SDK's cleanup.
    if (!ended) controller.abort();
  }
}

/** The `invalid_config` error of a client constructor that threw: one line, secret-free. */
export function clientError(error: unknown, secrets: readonly (string | null | undefined)[]): ModelError {
  const detail = error instanceof Error ? error.message : String(error);
  return modelError("invalid_config", `Cannot create the model API client: ${detail}`, secrets);
}

/** The per-request options both SDKs take: the guard's signal and timeout; the adapter's headers and retries when set. */
export function sdkRequestOptions(
  guard: RequestGuard,
  options: { headers?: Record<string, string>; maxRetries?: number },
) {
  const { timeoutMs } = guard.ctx;
  return {
    signal: guard.signal,
    ...(options.headers ? { headers: options.headers } : {}),
    ...(options.maxRetries === undefined ? {} : { maxRetries: options.maxRetries }),
    ...(timeoutMs === undefined ? {} : { timeout: timeoutMs }),
  };
}
