import { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError } from "openai";
import { redactSecrets } from "../core/redact.js";
import type { ModelError } from "./adapter.js";
import { causeDetail, modelError, statusHint } from "./model-errors.js";

/** Error mapping of the OpenAI-compatible adapter: anything thrown during a request → one `ModelError`. */

/** A failure the adapter detected itself; `toModelError` keeps its code and message. */
export class ModelFailure extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** What `toModelError` needs to know about the request that failed. */
export interface ModelErrorContext {
  aborted: boolean;
  idleTimedOut: boolean;
  /** True once the response headers of a streaming request arrived. */
  streaming: boolean;
  timeoutMs?: number;
  /** The longest silence allowed between two streamed chunks. */
  idleTimeoutMs?: number;
  secrets: (string | null | undefined)[];
}

const ENTITIES: Record<string, string> = { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'", nbsp: " " };

/** True for a body that is an HTML page (a proxy's or a login portal's), by content type or by its start. */
export function isHtml(body: string, contentType?: string | null): boolean {
  return /html/i.test(contentType ?? "") || /^\s*<(!doctype\s+html|html|head|body|center|h1)\b/i.test(body);
}

/** The title (else first heading) of an HTML page, tags and entities removed, a leading status code dropped. */
export function htmlTitle(html: string): string | undefined {
  const match = /<title[^>]*>([\s\S]*?)<\/title>/i.exec(html) ?? /<h1[^>]*>([\s\S]*?)<\/h1>/i.exec(html);
  if (!match?.[1]) return undefined;
  const text = match[1]
    .replace(/<[^>]*>/g, " ")
    .replace(/&(#\d+|[a-z]+);/gi, (all, name: string) =>
      name.startsWith("#")
        ? String.fromCharCode(Number(name.slice(1)))
        : (ENTITIES[name.toLowerCase()] ?? all),
    )
    .replace(/\s+/g, " ")
    .replace(/^\d{3}\b[\s:.-]*/, "")
    .trim();
  return text ? text.slice(0, 200) : undefined;
}

/** Classifies anything thrown during a request as a one-line, secret-free `ModelError`. */
export function toModelError(error: unknown, ctx: ModelErrorContext): ModelError {
  const make = (code: string, message: string, status?: number): ModelError =>
    modelError(code, message, ctx.secrets, status);
  const raw = error instanceof Error ? error.message || error.name : String(error);
  const cause = causeDetail(error);
  const after = ctx.timeoutMs === undefined ? "" : ` after ${ctx.timeoutMs} ms`;
  if (ctx.idleTimedOut) {
    return make(
      "timeout",
      `Model API stream stalled: no data after ${ctx.idleTimeoutMs ?? ctx.timeoutMs} ms`,
    );
  }
  if (ctx.aborted || error instanceof APIUserAbortError) return make("aborted", "Model request aborted");
  if (error instanceof ModelFailure) return make(error.code, error.message);
  if (error instanceof APIConnectionTimeoutError)
    return make("timeout", `Model API request timed out${after}`);
  if (error instanceof APIConnectionError) {
    const detail = cause.message && cause.message !== raw ? `${raw} (${cause.message})` : raw;
    return make("connection", `Model API connection error: ${detail}`);
  }
  if (error instanceof APIError) {
    if (typeof error.status === "number") {
      let detail = raw.replace(/^\d{3}\s+/, "");
      if (isHtml(detail, error.headers?.get("content-type"))) {
        // A proxy's error page: its title says enough, the markup would only drown the line.
        detail = `${htmlTitle(detail) ?? "no title"} (an HTML page, probably from a proxy)`;
      }
      detail = detail.replace(/^status code \(no body\)$/, "no error message in the body");
      detail += statusHint(error.status);
      return make(`http_${error.status}`, `Model API error (HTTP ${error.status}): ${detail}`, error.status);
    }
    return make("provider_error", `Model API error: ${raw}`);
  }
  if (error instanceof SyntaxError)
    return make("invalid_response", `Model API returned an invalid response: ${raw}`);
  if (cause.code === "UND_ERR_BODY_TIMEOUT" || cause.code === "UND_ERR_HEADERS_TIMEOUT") {
    return make("timeout", `Model API request timed out: ${cause.message ?? raw}`);
  }
  const detail = cause.message ? `${raw} (${cause.message})` : raw;
  if (ctx.streaming) {
    return make("stream_incomplete", `Model API stream broke off before the reply was complete: ${detail}`);
  }
  if (cause.code === "UND_ERR_SOCKET" || cause.code === "ECONNRESET") {
    return make("connection", `Model API connection broke off: ${detail}`);
  }
  return make("invalid_response", `Model API returned an invalid response: ${raw}`);
}
