import type { MiddlewareHandler } from "hono";
import type { Redact } from "./errors.js";

/**
 * One request's log line: `METHOD /path STATUS DURATIONms [stopReason] [(detail)]`, written once the
 * response is complete (for a stream, when its last chunk is sent). Never the query string, the
 * headers or the body.
 */
export class RequestLogEntry {
  private readonly started = performance.now();
  private status = 0;
  private streaming = false;
  private ended = false;
  private written = false;
  /** The run's stop reason, when the request ran the agent. */
  stopReason: string | undefined;
  /** What the response did not tell the client (an upstream address), for the operator: after the stop reason. */
  detail: string | undefined;

  constructor(
    private readonly method: string,
    private readonly path: string,
    private readonly write: (line: string) => void,
  ) {}

  /** The response is a stream: the line waits for `end()`. */
  stream(): void {
    this.streaming = true;
  }

  /** The stream's last chunk was sent. */
  end(stopReason: string | undefined): void {
    this.stopReason = stopReason;
    this.ended = true;
    this.flush();
  }

  /** The response's status is known (the handler returned). */
  respond(status: number): void {
    this.status = status;
    this.flush();
  }

  private flush(): void {
    if (this.written || this.status === 0 || (this.streaming && !this.ended)) return;
    this.written = true;
    const ms = Math.round(performance.now() - this.started);
    const stop = this.stopReason ? ` ${this.stopReason}` : "";
    const detail = this.detail ? ` (${this.detail})` : "";
    this.write(`${this.method} ${this.path} ${this.status} ${ms}ms${stop}${detail}`);
  }
}

/**
 * The Hono environment of the server's app: each request's log entry, when logging is on; the
 * client whose key it sent, when the server has one key per client (`owner`, see owners.ts).
 */
export type ServerEnv = { Variables: { log?: RequestLogEntry; owner?: string } };

/** Longest path a log line shows (a request may send megabytes before it is refused). */
const MAX_PATH_CHARS = 200;

/** The middleware that gives each request its `log` entry (read with `c.get("log")`). */
export function requestLog(write: (line: string) => void, redact: Redact): MiddlewareHandler<ServerEnv> {
  return async (c, next) => {
    // The raw (percent-encoded) path: a decoded one could break the line with a newline.
    const entry = new RequestLogEntry(
      c.req.method,
      redact(new URL(c.req.url).pathname, MAX_PATH_CHARS),
      write,
    );
    c.set("log", entry);
    await next();
    entry.respond(c.res.status);
  };
}
