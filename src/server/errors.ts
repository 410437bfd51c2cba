import type { StopReason } from "../core/events.js";

/** OpenAI's error body: the one shape every error of the server takes. */
export interface OpenAIErrorBody {
  error: { message: string; type: string; code: string | null; param?: string | null };
}

export type ErrorStatus = 400 | 401 | 404 | 413 | 500 | 502 | 503;

const TYPES: Record<ErrorStatus, string> = {
  400: "invalid_request_error",
  401: "authentication_error",
  404: "not_found_error",
  413: "invalid_request_error",
  500: "server_error",
  502: "upstream_error",
  503: "server_error",
};

/** The one place that turns a failure into an HTTP status and an OpenAI error body. */
export function errorBody(status: ErrorStatus, message: string, code: string | null = null): OpenAIErrorBody {
  return { error: { message, type: TYPES[status], code, param: null } };
}

/** `finish_reason` per stop reason (SPEC section 6); `undefined` for stops that are errors. */
export function finishReason(stopReason: StopReason): "stop" | "length" | undefined {
  switch (stopReason) {
    case "max_iterations":
    case "budget_exceeded":
      return "length";
    case "circuit_breaker":
    case "model_error":
      return undefined;
    default:
      return "stop";
  }
}
