/**
 * Who hears of each HTTP request a model call sends, retries included (SPEC section 11: one `chat`
 * span per request). The SDK clients retry inside their own request loop, where only the `fetch`
 * they are given (`fetchNoRepeats`) sees each request: `withAttempts` runs the opening of a
 * streaming request with the call's observer as the async context's, and that fetch tells it.
 */
import { AsyncLocalStorage } from "node:async_hooks";

/** Told of a model call's HTTP requests. Must not throw. */
export interface AttemptObserver {
  /** A request is sent: the first, or a retry. */
  attempt(): void;
  /** That request failed: `type` is the HTTP status, or the network error's code. */
  attemptFailed(type: string, message: string): void;
}

const current = new AsyncLocalStorage<AttemptObserver>();

/** Runs `open` (and the requests it sends, in its async context) with `observer` told of them. */
export function withAttempts<T>(observer: AttemptObserver | undefined, open: () => T): T {
  return observer ? current.run(observer, open) : open();
}

/** The observer of the request being sent, if any. */
export function attemptObserver(): AttemptObserver | undefined {
  return current.getStore();
}
