import Anthropic, {
  APIConnectionError,
  APIConnectionTimeoutError,
  APIError,
  APIUserAbortError,
} from "@anthropic-ai/sdk";
import { redactSecrets } from "../core/redact.js";
import type { Model, ModelError, ModelEvent, ModelRequest } from "./adapter.js";
import { AnthropicStreamAssembler, toAnthropicRequestBody } from "./anthropic-wire.js";
import { causeDetail, modelError, statusHint } from "./model-errors.js";

export { AnthropicStreamAssembler, toAnthropicMessages, toAnthropicRequestBody } from "./anthropic-wire.js";

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
  /** E.g. `http://127.0.0.1:8080` (the SDK appends `/v1/messages`). Defaults to `ANTHROPIC_BASE_URL`, then api.anthropic.com. */
  baseURL?: string;
  /** `max_tokens`, which Anthropic requires. Default 4096, or `thinking.budgetTokens + 4096` with thinking on. */
  maxTokens?: number;
  /** Retries of failed requests (default 3). */
  maxRetries?: number;
  /** Time to the response headers per attempt, and the longest silence between two streamed events. */
  timeoutMs?: number;
  /** Extended thinking: sent as `thinking: { type: "enabled", budget_tokens }` (at least 1024, below `maxTokens`). */
  thinking?: { budgetTokens: number };
  /** Extra HTTP headers sent with every request (e.g. `anthropic-beta`). */
  headers?: Record<string, string>;
  /** Bring your own client; `apiKey`/`baseURL` are then ignored. */
  client?: Anthropic;
  /** Extra request-body fields (temperature, metadata, tool_choice, ...), merged over the defaults. */
  extraBody?: Record<string, unknown>;
}

const DEFAULT_MAX_RETRIES = 3;

/** What `toAnthropicModelError` needs to know about the request that failed. */
export interface AnthropicErrorContext {
  aborted: boolean;
  idleTimedOut: boolean;
  streaming: boolean;
  timeoutMs?: number;
  secrets: (string | null | undefined)[];
}

/** Classifies anything thrown during a request as a one-line, secret-free `ModelError`. */
export function toAnthropicModelError(error: unknown, ctx: AnthropicErrorContext): ModelError {
  const make = (code: string, message: string, status?: number): ModelError =>
    modelError(code, message, ctx.secrets, status);
  const raw = error instanceof Error ? error.message || error.name : String(error);
  const cause = causeDetail(error);
  const after = ctx.timeoutMs === undefined ? "" : ` after ${ctx.timeoutMs} ms`;
  if (ctx.idleTimedOut) return make("timeout", `Model API stream stalled: no data${after}`);
  if (ctx.aborted || error instanceof APIUserAbortError) return make("aborted", "Model request aborted");
  if (error instanceof APIConnectionTimeoutError)
    return make("timeout", `Model API request timed out${after}`);
  if (error instanceof APIConnectionError) {
    const detail = cause.message && cause.message !== raw ? `${raw} (${cause.message})` : raw;
    return make("connection", `Model API connection error: ${detail}`);
  }
  if (error instanceof APIError) {
    // Anthropic's body is {"type":"error","error":{"type","message"}}; the SDK's own message is that JSON.
    const detail = error.apiMessage ?? raw.replace(/^\d{3}\s+/, "");
    if (typeof error.status === "number") {
      let text = detail.replace(/^status code \(no body\)$/, "no error message in the body");
      text += statusHint(error.status);
      return make(`http_${error.status}`, `Model API error (HTTP ${error.status}): ${text}`, error.status);
    }
    // An `event: error` inside a 200 stream, e.g. overloaded_error.
    return make("provider_error", `Model API error: ${detail}${error.type ? ` (${error.type})` : ""}`);
  }
  if (error instanceof SyntaxError)
    return make("invalid_response", `Model API returned an invalid response: ${raw}`);
  if (cause.code === "UND_ERR_BODY_TIMEOUT" || cause.code === "UND_ERR_HEADERS_TIMEOUT")
    return make("timeout", `Model API request timed out: ${cause.message ?? raw}`);
  if (/Could not resolve authentication method/.test(raw))
    return make("missing_api_key", "No API key for the Anthropic API: set ANTHROPIC_API_KEY");
  if (ctx.streaming) {
    const detail = cause.message ? `${raw} (${cause.message})` : raw;
    return make("stream_incomplete", `Model API stream broke off before the reply was complete: ${detail}`);
  }
  return make("invalid_response", `Model API returned an invalid response: ${raw}`);
}

/**
 * Creates the adapter. Never throws, here or later: a client that cannot be constructed (no API
 * key) becomes an `error` event with code "missing_api_key" on the first `stream()` call.
 *
 * `stream()` yields `thinking_delta` / `text_delta` events as they arrive, then exactly one `done`
 * (the assembled reply, see `AnthropicStreamAssembler`) or `error` (codes: `http_<status>`,
 * `provider_error` for an `event: error` inside a 200 stream, `connection`, `timeout`, `aborted`,
 * `stream_incomplete` when the stream breaks, or ends with neither `stop_reason` nor `message_stop`, `invalid_response`,
 * `missing_api_key`, `invalid_config`). Error messages are one line and never contain the API key.
 * Breaking out of the iteration cancels the request.
 */
export function anthropicModel(options: AnthropicModelOptions): Model {
  let client = options.client;
  const envKey = () => process.env.ANTHROPIC_API_KEY?.trim() || undefined;
  const envToken = () => process.env.ANTHROPIC_AUTH_TOKEN?.trim() || undefined;
  /** The client, or `undefined` when there is no credential at all. Throws when the SDK refuses the options. */
  const getClient = (): Anthropic | undefined => {
    if (client) return client;
    const baseURL = options.baseURL ?? (process.env.ANTHROPIC_BASE_URL?.trim() || undefined);
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
      // Failures reach the caller as error events; keep the client quiet unless ANTHROPIC_LOG asks.
      ...(process.env.ANTHROPIC_LOG ? {} : { logLevel: "off" as const }),
      ...(options.timeoutMs === undefined ? {} : { timeout: options.timeoutMs }),
    });
    return client;
  };

  async function* stream(request: ModelRequest, signal?: AbortSignal): AsyncGenerator<ModelEvent> {
    const ctx: AnthropicErrorContext = {
      aborted: false,
      idleTimedOut: false,
      streaming: false,
      timeoutMs: options.timeoutMs,
      // The key, and any credential-looking header value, never appear in a message.
      secrets: [
        options.apiKey,
        envKey(),
        envToken(),
        ...Object.entries(options.headers ?? {})
          .filter(([name]) => /auth|key|token|secret|cookie/i.test(name))
          .map(([, value]) => value),
      ],
    };
    if (signal?.aborted) {
      yield {
        type: "error",
        error: toAnthropicModelError(new APIUserAbortError(), { ...ctx, aborted: true }),
      };
      return;
    }
    // Our own controller: fired by the caller's signal, the idle timer, or an early `return()`.
    const controller = new AbortController();
    const onAbort = () => {
      ctx.aborted = true;
      controller.abort();
    };
    signal?.addEventListener("abort", onAbort, { once: true });
    let idle: ReturnType<typeof setTimeout> | undefined;
    const disarm = () => clearTimeout(idle);
    const arm = () => {
      disarm();
      if (options.timeoutMs === undefined) return;
      idle = setTimeout(() => {
        ctx.idleTimedOut = true;
        controller.abort();
      }, options.timeoutMs);
    };
    try {
      let c: Anthropic | undefined;
      try {
        c = getClient();
      } catch (error) {
        const detail = error instanceof Error ? error.message : String(error);
        const message = redactSecrets(
          `Cannot create the model API client: ${detail}`.replace(/\s+/g, " "),
          ctx.secrets,
        );
        yield { type: "error", error: { code: "invalid_config", message } };
        return;
      }
      if (!c) {
        const message =
          "No API key for the Anthropic API: set ANTHROPIC_API_KEY, or pass --base-url for a local server that needs none";
        yield { type: "error", error: { code: "missing_api_key", message } };
        return;
      }
      ctx.secrets.push(c.apiKey, c.authToken);
      const requestOptions = {
        signal: controller.signal,
        ...(options.headers ? { headers: options.headers } : {}),
        ...(options.maxRetries === undefined ? {} : { maxRetries: options.maxRetries }),
        ...(options.timeoutMs === undefined ? {} : { timeout: options.timeoutMs }),
      };
      const params = toAnthropicRequestBody(
        request,
        options,
      ) as unknown as Anthropic.MessageCreateParamsStreaming;
      const { data: events, response } = await c.messages.create(params, requestOptions).withResponse();
      ctx.streaming = true;
      const assembler = new AnthropicStreamAssembler();
      let received = 0;
      arm();
      // The timer only runs while we wait for the next event, never while the consumer works.
      for await (const event of events) {
        received++;
        disarm();
        for (const delta of assembler.push(event)) yield delta;
        arm();
      }
      disarm();
      // The client ends the iteration quietly (no throw) when its signal fires mid-stream.
      if (controller.signal.aborted) throw new APIUserAbortError();
      if (!assembler.complete) {
        const type = response.headers.get("content-type") ?? "none";
        const message =
          received === 0 && !type.includes("event-stream")
            ? `Model API answered a streaming request without an event stream (content-type: ${type})`
            : "Model API stream ended before the reply was complete (no stop_reason, no message_stop)";
        yield { type: "error", error: { code: "stream_incomplete", message } };
        return;
      }
      yield { type: "done", message: assembler.reply() };
    } catch (error) {
      yield { type: "error", error: toAnthropicModelError(error, ctx) };
    } finally {
      disarm();
      signal?.removeEventListener("abort", onAbort);
      controller.abort(); // releases the connection when the consumer stopped early
    }
  }

  return {
    id: options.model,
    stream: (request, streamOptions) => stream(request, streamOptions?.signal),
  };
}
