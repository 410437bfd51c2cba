import { AgentloopError, errorMessage } from "../core/errors.js";
import type { RunResult, StopReason } from "../core/events.js";
import { StoreError } from "../store/types.js";

/** OpenAI's error body: the one shape every error of the server takes. */
export interface OpenAIErrorBody {
  error: { message: string; type: string; code: string | null; param: string | null };
}

export type ErrorStatus = 400 | 401 | 403 | 404 | 409 | 413 | 415 | 422 | 500 | 501 | 502 | 503;

const TYPES: Record<ErrorStatus, string> = {
  400: "invalid_request_error",
  401: "authentication_error",
  403: "permission_error",
  404: "not_found_error",
  409: "conflict_error",
  413: "invalid_request_error",
  415: "invalid_request_error",
  422: "invalid_request_error",
  500: "server_error",
  501: "server_error",
  502: "upstream_error",
  503: "server_error",
};

/**
 * Removes the server's secrets (API keys) from a text before it leaves the process, first cut to
 * `max` characters (default `MAX_SHOWN_CHARS`) without splitting a secret.
 */
export type Redact = (text: string, max?: number) => string;

/** Longest text the server shows of anything it did not write itself (an error, a log detail). */
export const MAX_SHOWN_CHARS = 4000;

/**
 * The one place that turns a failure into an HTTP status and an OpenAI error body. Messages
 * must never hold a secret: callers pass fixed text, or text that may come from elsewhere (an
 * error, the model API) through the app's `Redact`.
 */
function errorBody(
  status: ErrorStatus,
  message: string,
  code: string | null = null,
  param: string | null = null,
): OpenAIErrorBody {
  return { error: { message, type: TYPES[status], code, param } };
}

/** An error response; `headers` are added (e.g. `x-should-retry`). */
export function errorResponse(
  status: ErrorStatus,
  message: string,
  code: string | null = null,
  options: { param?: string | null; headers?: Record<string, string> } = {},
): Response {
  return new Response(JSON.stringify(errorBody(status, message, code, options.param ?? null)), {
    status,
    headers: { "content-type": "application/json", ...options.headers },
  });
}

/** What a remote client reads instead of a `withheld` error, by its code. */
const WITHHELD: Record<string, string> = {
  connection:
    "The agent's model API could not be reached (connection error); the server's log has the details.",
  http_401:
    "The agent's model API refused the server's credentials (HTTP 401): the server's operator must fix its API key; the server's log has the details.",
  http_403:
    "The agent's model API denied the server's credentials access (HTTP 403): the server's operator must fix its API key or permissions; the server's log has the details.",
};

/**
 * Whether a run's error must not reach a remote client as it is: a connection failure names where
 * the agent's model API is (`Nothing is listening at http://10.0.0.7:8000/v1`), an internal address;
 * a 401 or 403 of the model API is about the server's own key (the provider's message may quote part of it).
 */
export const withheld = (error: { code: string }): boolean => Object.hasOwn(WITHHELD, error.code);

/**
 * A run's error as a remote client may read it: one that is `withheld` says only what failed and
 * whose it is to fix (the server's log line has the rest); others (the provider's own message,
 * secrets redacted) pass as they are.
 */
export function clientError<E extends { message: string; code: string }>(error: E): E {
  if (!withheld(error)) return error;
  return { ...error, message: WITHHELD[error.code] as string };
}

/**
 * The status of a run's model error on the wire: the client's own fault stays the client's, as the
 * model API said it (its request does not fit the context window: 400 `context_length_exceeded`;
 * HTTP 400, 413, 422: the same status); the model API's rate limit is a 503 (the server is busy);
 * anything else (the model API failed, refused the server's key, does not know its model, or the
 * run broke its circuit) is a 502.
 */
function runErrorStatus(error: { code: string } | undefined): ErrorStatus {
  switch (error?.code) {
    case "context_length_exceeded":
    case "http_400":
      return 400;
    case "http_413":
      return 413;
    case "http_422":
      return 422;
    case "http_429":
      return 503;
    default:
      return 502;
  }
}

/**
 * The error answer of a run that ended on `circuit_breaker` or `model_error` before anything was
 * streamed: status as `runErrorStatus` says, code the model error's (`context_length_exceeded`,
 * `http_400`), else the stop reason (`upstream_error`'s 502). The model was already retried by its
 * adapter, so clients are told not to retry (`x-should-retry: false`, which the official clients
 * honour).
 */
export function runErrorResponse(result: RunResult, redact: Redact): Response {
  const error = result.error && clientError(result.error);
  const message = redact(error?.message ?? `The run stopped: ${result.stopReason}.`);
  const status = runErrorStatus(result.stopReason === "model_error" ? error : undefined);
  const code = status === 502 ? result.stopReason : (error?.code ?? result.stopReason);
  return errorResponse(status, message, code, { headers: { "x-should-retry": "false" } });
}

/**
 * What a client reads when the store failed during a run: the store's one-line reason, and that
 * the run keeps its last checkpoint (so it can be resumed once the store is back); or, when
 * another process took the run's session over (`session_busy` from a checkpoint: this server's
 * lease ran out), that the run goes on there, and where to see how it ends.
 */
export function storeFailure(
  error: StoreError,
  runId: string | undefined,
): { status: 409 | 503; message: string; code: string } {
  if (error.code === "session_busy") {
    const outcome = runId ? `: GET /v1/runs/${runId} tells how it ends` : "";
    return {
      status: 409,
      message: `This server gave this run up because it could not renew its lease in time (it was paused, or cut off from the store); another replica (or another process sharing the store) goes on with it, or resumes it${outcome}.`,
      code: "session_lost",
    };
  }
  const resume = runId ? `: POST /v1/runs/${runId}/resume continues it once the store is back` : "";
  return {
    status: 503,
    message: `The run's store failed (${error.message}); the run keeps its last checkpoint${resume}.`,
    code: "store_unavailable",
  };
}

/**
 * The status of an `AgentloopError` the core threw at the start of a run: the request's image is
 * the client's to fix (413 over the agent's size limit, 400 not an image); anything else is the
 * server's (500).
 */
function agentloopErrorStatus(code: string): ErrorStatus {
  switch (code) {
    case "image_too_large":
      return 413;
    case "invalid_image":
      return 400;
    default:
      return 500;
  }
}

/**
 * The answer of an error no endpoint answered itself (the app's `onError`): an `AgentloopError` (a
 * caller error of the core) keeps its code, with the status `agentloopErrorStatus` says; a store
 * failure is a 503 (409 when the run was taken over); anything else a 500.
 */
export function unexpectedErrorResponse(error: unknown, redact: Redact): Response {
  if (error instanceof StoreError) {
    const { status, message, code } = storeFailure(error, undefined);
    return errorResponse(status, redact(message), code);
  }
  if (error instanceof AgentloopError) {
    return errorResponse(agentloopErrorStatus(error.code), redact(error.message), error.code);
  }
  return errorResponse(500, redact(`Internal server error: ${errorMessage(error)}`), "internal_error");
}

/** The `error` event that ends a stream the server cut at its shutdown deadline. */
const SHUTDOWN_CUT = {
  type: "error",
  message: "The server shut down before the run finished: retry the request.",
  code: "shutting_down",
} as const;

/** The same for a stored run, which stays resumable (its last checkpoint is kept). */
export function shutdownCut(runId: string, stored: boolean) {
  if (!stored) return { ...SHUTDOWN_CUT, runId };
  const message = `The server shut down before the run finished; the run keeps its last checkpoint: POST /v1/runs/${runId}/resume continues it on any server sharing the store.`;
  return { ...SHUTDOWN_CUT, message, runId };
}

/**
 * `finish_reason` per stop reason (SPEC section 6; `tool_calls` for a run waiting on the client's
 * own tools, section 14); `undefined` for the stops that are errors
 * (`circuit_breaker`, `model_error`). `aborted` reaches a connected client only when the run's
 * time limit struck (a client that disconnected reads nothing), so like the other limits it is
 * `length`: the answer was cut short.
 */
export function finishReason(stopReason: StopReason): "stop" | "length" | "tool_calls" | undefined {
  switch (stopReason) {
    case "tool_calls":
      return "tool_calls";
    case "final_answer":
    case "task_completion":
    case "converse":
    case "ask_question":
    case "approval_required":
      return "stop";
    case "max_iterations":
    case "budget_exceeded":
    case "aborted":
      return "length";
    case "circuit_breaker":
    case "model_error":
      return undefined;
  }
}
