import { redactSecrets } from "../core/redact.js";
import type { ModelError } from "./adapter.js";

/** Shared by the adapters' error mapping: one line, secrets removed, length capped. */

const MAX_MESSAGE_LENGTH = 1000;

/** A `ModelError` whose message is one line, without any of `secrets`, at most 1,000 characters. */
export function modelError(
  code: string,
  message: string,
  secrets: readonly (string | null | undefined)[],
  status?: number,
): ModelError {
  let text = redactSecrets(message.replace(/\s+/g, " ").trim(), secrets);
  if (text.length > MAX_MESSAGE_LENGTH) text = `${text.slice(0, MAX_MESSAGE_LENGTH - 3)}...`;
  return status === undefined ? { code, message: text } : { code, message: text, status };
}

/** The innermost message and code of an error's `cause` chain, e.g. "connect ECONNREFUSED 127.0.0.1:1". */
export function causeDetail(error: unknown): { message?: string; code?: string } {
  let message: string | undefined;
  let code: string | undefined;
  let current: unknown = (error as { cause?: unknown })?.cause;
  for (let i = 0; i < 6 && current instanceof Error; i++) {
    if (current.message) message = current.message;
    const c = (current as { code?: unknown }).code;
    if (typeof c === "string") code = c;
    current = current.cause;
  }
  return { message, code };
}

/** What to check for the statuses that are the caller's to fix. */
export function statusHint(status: number): string {
  if (status === 401) return " (check the API key)";
  if (status === 404) return " (check the model id and the base URL)";
  return "";
}
