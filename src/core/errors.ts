/**
 * What an `AgentloopError` is about; every code is documented in docs/errors.md. All are mistakes
 * the caller (the program, or the person at the CLI) must fix; none is a model or tool failure.
 */
export type AgentloopErrorCode =
  /** An agent option is unusable (a budget that is not positive, an `outputSchema` that is not an object schema). */
  | "invalid_option"
  /** A tool's name or parameters schema is unusable, or two tools share a name. */
  | "invalid_tool"
  /** A run state that cannot continue (completed, malformed), or a decision on a call that is not waiting. */
  | "invalid_state"
  /** An input part of no known type (only `text` and `image` are). */
  | "invalid_input"
  /** An input image that is not a PNG, JPEG, GIF or WebP image, or not a URL, data: URL, base64 or bytes. */
  | "invalid_image"
  /** An input image larger than `maxImageBytes`. */
  | "image_too_large"
  /** A required MCP server failed to start. */
  | "mcp_start"
  /** No MCP prompt has that name, or a required argument of it is missing. */
  | "mcp_prompt"
  /** The start (of MCP servers, a sign-in) was given up because its signal aborted. */
  | "aborted"
  /** A configuration value, file or store the CLI or server cannot use. */
  | "config"
  /** A command line the CLI cannot run (flags that do not fit, an input file that cannot be read). */
  | "usage";

/**
 * The one error class callers see. `code` is stable and machine-readable; `message` is one
 * line that names the problem and the fix. Errors the model must react to never throw: they
 * become error tool results.
 */
export class AgentloopError extends Error {
  readonly code: AgentloopErrorCode;

  constructor(code: AgentloopErrorCode, message: string, options?: { cause?: unknown }) {
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
