/**
 * The one error class callers see. `code` is stable and machine-readable; `message` is one
 * line that names the problem and the fix. Errors the model must react to never throw: they
 * become error tool results.
 */
export class AgentloopError extends Error {
  readonly code: string;

  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "AgentloopError";
    this.code = code;
  }
}

/** One line of text for any thrown value. */
export function errorMessage(error: unknown): string {
  if (error instanceof Error) return error.message || error.name;
  if (typeof error === "string") return error;
  try {
    return JSON.stringify(error) ?? String(error);
  } catch {
    return String(error);
  }
}
