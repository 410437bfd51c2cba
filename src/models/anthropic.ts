import Anthropic, {
  APIConnectionError,
  APIConnectionTimeoutError,
  APIError,
  APIUserAbortError,
} from "@anthropic-ai/sdk";
import type { Model, ModelError, ModelEvent, ModelRequest } from "./adapter.js";
import { AnthropicStreamAssembler } from "./anthropic-assembler.js";
import {
  type AnthropicStructuredOutput,
  answerFromOutputTool,
  defaultStructuredOutput,
} from "./anthropic-parts.js";
import { anthropicWireCache, toAnthropicRequestBody } from "./anthropic-wire.js";
import {
  classifyError,
  fetchNoRepeats,
  fetchNoRepeatsOver,
  type ModelErrorContext,
  ModelFailure,
  type SdkError,
} from "./model-errors.js";
import { FREE, isLocalURL } from "./pricing.js";
import {
  clientError,
  DEFAULT_IDLE_TIMEOUT_MS,
  guardRequest,
  type RequestGuard,
  sdkRequestOptions,
} from "./request-guard.js";
import { DEFAULT_MAX_RETRIES, type OpenedStream, type StreamAttempts } from "./stream-retry.js";

// `agentloop-runtime/anthropic`: this module's exports are the entry point's (test/exports.test.ts pins them).
export type { AnthropicStructuredOutput } from "./anthropic-parts.js";

/**
 * The Anthropic Messages adapter (api.anthropic.com and servers that speak its protocol). HTTP,
 * SSE parsing and retries are the official `@anthropic-ai/sdk`'s: it retries 408/409/429/5xx and
 * connection errors with exponential backoff and jitter, honouring `retry-after-ms` /
 * `retry-after` (and `x-should-retry`), and never 400/401/403/404.
 */
export interface AnthropicModelOptions {
  /** The model id sent to the provider, e.g. "claude-sonnet-4-5". */
  model: string;
  /**
   * Sent as the `x-api-key` header. Defaults to `ANTHROPIC_API_KEY`, then `ANTHROPIC_AUTH_TOKEN` (sent
   * as `Authorization: Bearer`); with a `baseURL` and no credential at all, a placeholder key is sent.
   */
  apiKey?: string;
  /**
   * E.g. `http://127.0.0.1:8080` (the SDK appends `/v1/messages`; a trailing `/v1` is dropped, so
   * `http://127.0.0.1:8080/v1` works too). Defaults to `ANTHROPIC_BASE_URL`, then api.anthropic.com.
   */
  baseURL?: string;
  /** `max_tokens`, which Anthropic requires. Default 4096, or `thinking.budgetTokens + 4096` with thinking on. */
  maxTokens?: number;
  /**
   * Retries of failed requests (default 3): HTTP 408/409/429/5xx and connection errors (by the
   * client), and streams that break off before the reply was complete (by the adapter, see
   * `retryPartialStreams`). Each request of a stream retry has its own HTTP retries.
   */
  maxRetries?: number;
  /**
   * The longest wait for any byte, default 120,000 ms: for the response headers of each request
   * (a server that accepts the connection and never answers; the client retries such a request
   * like other timeouts) and between two streamed events. The call then ends with `timeout`.
   */
  timeoutMs?: number;
  /**
   * A stream that breaks off (connection lost, or ended without `message_stop`) is requested again
   * from scratch when it has not yet yielded a text or thinking delta. Default false: once deltas
   * were yielded, the call ends with `stream_incomplete`. True retries those too: the deltas already
   * yielded may then be repeated by the retry, while the final reply (`done`) holds only the retry's.
   */
  retryPartialStreams?: boolean;
  /** Extended thinking: sent as `thinking: { type: "enabled", budget_tokens }` (at least 1024, below `maxTokens`). */
  thinking?: { budgetTokens: number };
  /** Extra HTTP headers sent with every request (e.g. `anthropic-beta`). */
  headers?: Record<string, string>;
  /** Bring your own client; `apiKey`/`baseURL` are then ignored. */
  client?: Anthropic;
  /**
   * The fetch the SDK client sends its requests with (default: the global one): how a run is
   * recorded and replayed at the HTTP boundary (`recorder`, `replayModel`). Not with `client`.
   */
  fetch?: typeof fetch;
  /** Extra request-body fields (temperature, metadata, tool_choice, ...), merged over the defaults. */
  extraBody?: Record<string, unknown>;
  /**
   * How an agent's `outputSchema` reaches the model: "native" (`output_config.format`) or "tool"
   * (a tool the model must call to answer). Default "native", except "tool" for the models without
   * structured outputs (Claude 2 and 3, Claude Sonnet 4 and Opus 4). See `AnthropicStructuredOutput`.
   */
  structuredOutput?: AnthropicStructuredOutput;
}

/** The `@anthropic-ai/sdk` client's error classes, for the shared classification. */
function sdkError(error: unknown): SdkError | undefined {
  if (error instanceof APIUserAbortError) return { kind: "abort" };
  if (error instanceof APIConnectionTimeoutError) return { kind: "connection_timeout" };
  if (error instanceof APIConnectionError) return { kind: "connection" };
  if (!(error instanceof APIError)) return undefined;
  // Anthropic's body is {"type":"error","error":{"type","message"}}; the SDK's own message is that JSON.
  const detail = error.apiMessage ?? (error.message || error.name).replace(/^\d{3}\s+/, "");
  const provider = error.type ? { code: error.type } : {};
  if (typeof error.status === "number") {
    const contentType = error.headers?.get("content-type");
    return { kind: "api", status: error.status, detail, contentType, ...provider };
  }
  // An `event: error` inside a 200 stream, e.g. overloaded_error.
  return { kind: "api", detail: `${detail}${error.type ? ` (${error.type})` : ""}`, ...provider };
}

/** Classifies anything thrown during a request as a one-line, secret-free `ModelError`. */
function toAnthropicModelError(error: unknown, ctx: ModelErrorContext): ModelError {
  // The SDK's own complaint when a client brought by the caller has no credential.
  const noKey = !(error instanceof APIError) && /Could not resolve authentication method/.test(String(error));
  const failure = noKey
    ? new ModelFailure("missing_api_key", "No API key for the Anthropic API: set ANTHROPIC_API_KEY")
    : error;
  return classifyError(failure, ctx, sdkError(error));
}

/**
 * Creates the adapter. Never throws, here or later: a client that cannot be constructed (no API
 * key) becomes an `error` event with code "missing_api_key" on the first `stream()` call.
 *
 * `stream()` yields `thinking_delta` / `text_delta` events as they arrive, then exactly one `done`
 * (the assembled reply, see `AnthropicStreamAssembler`) or `error` (codes: `context_length_exceeded`
 * for a prompt longer than the context window ("prompt is too long"), `http_<status>`,
 * `provider_error` for an `event: error` inside a 200 stream, `connection`, `timeout` (no response
 * in time, or a stream silent for longer than the idle timeout), `aborted`, `stream_incomplete`
 * when the stream breaks, or ends with neither `stop_reason` nor `message_stop` (after the retries
 * described at `retryPartialStreams`), or is not an event stream, `invalid_response` (malformed
 * JSON, an HTML page), `missing_api_key`, `invalid_config`). Error messages are one line, never
 * contain the API key, and summarise an HTML error page by its title. Breaking out of the
 * iteration cancels the request. A model at a local base URL (this machine or a private network)
 * has `price` `FREE`; the Agent's `prices` override it.
 */
export function anthropicModel(options: AnthropicModelOptions): Model {
  let client = options.client;
  const envKey = () => process.env.ANTHROPIC_API_KEY?.trim() || undefined;
  const envToken = () => process.env.ANTHROPIC_AUTH_TOKEN?.trim() || undefined;
  /** The client, or `undefined` when there is no credential at all. Throws when the SDK refuses the options. */
  const getClient = (): Anthropic | undefined => {
    if (client) return client;
    // The SDK appends `/v1/messages`: a base URL given with its `/v1` (as OpenAI-style ones are) works too.
    const baseURL = (options.baseURL ?? (process.env.ANTHROPIC_BASE_URL?.trim() || undefined))?.replace(
      /\/v1\/?$/,
      "",
    );
    const authToken = envToken();
    // Local servers that speak the Messages API need no key, but the client insists on a credential.
    const apiKey = options.apiKey?.trim() || envKey() || (authToken || !baseURL ? undefined : "not-needed");
    if (!apiKey && !authToken) return undefined;
    client = new Anthropic({
      // SDK 1.12 sends an API key as `Authorization: Bearer`; send it the documented way,
      // `x-api-key`, which Anthropic-compatible servers (proxies, local servers) read too.
      ...(apiKey ? { apiKey, defaultHeaders: { "x-api-key": apiKey, authorization: null } } : { authToken }),
      ...(baseURL === undefined ? {} : { baseURL }),
      maxRetries: options.maxRetries ?? DEFAULT_MAX_RETRIES,
      fetch: options.fetch ? fetchNoRepeatsOver(options.fetch) : fetchNoRepeats,
      // Failures reach the caller as error events; keep the client quiet unless ANTHROPIC_LOG asks.
      ...(process.env.ANTHROPIC_LOG ? {} : { logLevel: "off" as const }),
      ...(options.timeoutMs === undefined ? {} : { timeout: options.timeoutMs }),
    });
    return client;
  };

  const wireOptions = { ...options, cache: anthropicWireCache() };

  /** The events of one request, or for a streaming one what `guardRequest` reads its stream with. */
  function call(
    request: ModelRequest,
    guard: RequestGuard,
  ): Iterable<ModelEvent> | AsyncIterable<ModelEvent> | StreamAttempts {
    let c: Anthropic | undefined;
    try {
      c = getClient();
    } catch (error) {
      return [{ type: "error", error: clientError(error, guard.ctx.secrets) }];
    }
    if (!c) {
      const message =
        "No API key for the Anthropic API: set ANTHROPIC_API_KEY, or pass --base-url for a local server that needs none";
      return [{ type: "error", error: { code: "missing_api_key", message } }];
    }
    guard.ctx.secrets.push(c.apiKey, c.authToken);
    guard.ctx.baseURL = c.baseURL;
    const requestOptions = sdkRequestOptions(guard, options);
    const params = toAnthropicRequestBody(
      request,
      wireOptions,
    ) as unknown as Anthropic.MessageCreateParamsStreaming;
    const sdk = c; // `c` as narrowed above, for the closure
    const attempts: StreamAttempts = {
      // Through the client's `post`, not `messages.create`: that one writes a deprecation notice
      // to stderr (console.warn, which no logLevel silences) on every request to some models.
      open: (): Promise<OpenedStream> =>
        sdk
          .post<OpenedStream["data"]>("/v1/messages", { ...requestOptions, body: params, stream: true })
          .withResponse(),
      assembler: () => new AnthropicStreamAssembler(),
      endedEarly: (received, type) =>
        received === 0 && !type.includes("event-stream")
          ? new ModelFailure(
              "stream_incomplete",
              `Model API answered a streaming request without an event stream (content-type: ${type || "none"})`,
              true, // another request would get the same answer
            )
          : new ModelFailure(
              "stream_incomplete",
              "Model API stream ended before the reply was complete (no stop_reason, no message_stop)",
            ),
      retries: options.maxRetries ?? DEFAULT_MAX_RETRIES,
      retryPartial: options.retryPartialStreams === true,
      toError: toAnthropicModelError,
    };
    const output = request.output;
    if (output && (options.structuredOutput ?? defaultStructuredOutput(options.model)) === "tool") {
      // The output tool's call becomes the answer; it came as a tool input, which streams no text:
      // it goes out as one delta, like text.
      attempts.finish = (reply) => {
        const message = answerFromOutputTool(reply, output.name);
        const done: ModelEvent = { type: "done", message };
        return message.content !== reply.content
          ? [{ type: "text_delta", text: message.content }, done]
          : [done];
      };
    }
    return attempts;
  }

  const baseURL = options.client?.baseURL ?? options.baseURL ?? process.env.ANTHROPIC_BASE_URL?.trim();
  return {
    id: options.model,
    ...(isLocalURL(baseURL) && { price: FREE }),
    structuredOutput: true,
    provider: "anthropic",
    ...(!options.client && {
      withFetch: (fetch: typeof globalThis.fetch) => anthropicModel({ ...options, fetch }),
    }),
    baseURL: baseURL || "https://api.anthropic.com",
    stream: (request, streamOptions) => {
      const { apiKey, headers } = options;
      const timeoutMs = options.timeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS;
      const guard = {
        credentials: [apiKey, envKey(), envToken()],
        headers,
        timeoutMs,
        attempts: streamOptions?.attempts,
      };
      return guardRequest(streamOptions?.signal, guard, toAnthropicModelError, (g) => call(request, g));
    },
  };
}
