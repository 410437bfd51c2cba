// The subpaths, not the package root: the root also loads the Bedrock client and the helpers
// (a few modules fewer before the first request). The same modules, so the same classes.
import { AzureOpenAI } from "openai/azure";
import { OpenAI } from "openai/client";
import {
  APIConnectionError,
  APIConnectionTimeoutError,
  APIError,
  APIUserAbortError,
  OpenAIError,
} from "openai/core/error";
import type { Model, ModelError, ModelEvent, ModelRequest } from "./adapter.js";
import { ChatStreamAssembler, completionToReply } from "./chat-assembler.js";
import {
  classifyError,
  fetchNoRepeats,
  fetchNoRepeatsOver,
  htmlTitle,
  isHtml,
  type ModelErrorContext,
  ModelFailure,
  type SdkError,
} from "./model-errors.js";
import { chatWireCache, defaultSystemRole, type SystemRole, toChatRequestBody } from "./openai-wire.js";
import { FREE, isLocalURL } from "./pricing.js";
import {
  clientError,
  DEFAULT_IDLE_TIMEOUT_MS,
  guardRequest,
  type RequestGuard,
  sdkRequestOptions,
} from "./request-guard.js";
import { DEFAULT_MAX_RETRIES, type OpenedStream, type StreamAttempts } from "./stream-retry.js";

/**
 * The OpenAI-compatible Chat Completions adapter (OpenAI, Azure OpenAI, AI DIAL, Ollama, vLLM,
 * llama.cpp server, LM Studio, OpenRouter, groq, DeepSeek...). HTTP, SSE parsing and retries are
 * the official `openai` client's: it retries 408/409/429/5xx and connection errors with
 * exponential backoff and jitter, honouring `Retry-After` (seconds or an HTTP date, up to 60 s) and
 * `retry-after-ms`, and never 400/401/404.
 */
export interface OpenAIChatModelOptions {
  /** The model id sent to the provider; with `azure`, also the deployment unless one is given. */
  model: string;
  /**
   * Defaults to `OPENAI_API_KEY` (with `azure`: `AZURE_OPENAI_API_KEY`, then `OPENAI_API_KEY`); with a
   * `baseURL` and no key at all, a placeholder is sent (not with `azure`).
   */
  apiKey?: string;
  /**
   * E.g. `http://localhost:11434/v1`. Defaults to `OPENAI_BASE_URL`, then api.openai.com. With
   * `azure`: the resource endpoint (`https://my-resource.openai.azure.com`, or the AI DIAL host);
   * `/openai` is appended unless the URL already ends with it.
   */
  baseURL?: string;
  /**
   * Azure OpenAI and AI DIAL: requests go to
   * `<baseURL>/openai/deployments/<deployment, default model>/chat/completions?api-version=<apiVersion>`
   * with the key in an `api-key` header (no Bearer). Default: not set (plain OpenAI style).
   */
  azure?: { apiVersion: string; deployment?: string };
  /**
   * The role of the system prompt. Default "developer" for OpenAI reasoning models (ids starting
   * with o1, o3, o4 or gpt-5) on api.openai.com, else "system" (custom base URLs and Azure included).
   */
  systemRole?: "system" | "developer";
  /** Sent as `parallel_tool_calls` when the request has tools. Default: not sent (the provider's default). */
  parallelToolCalls?: boolean;
  /** Extra HTTP headers sent with every request. */
  headers?: Record<string, string>;
  /**
   * Retries of failed requests (default 3): HTTP 408/409/429/5xx and connection errors (by the
   * client), and streams that break off before the reply was complete (by the adapter, see
   * `retryPartialStreams`). Each request of a stream retry has its own HTTP retries.
   */
  maxRetries?: number;
  /**
   * The longest wait for any byte, default 120,000 ms: for the response headers of each request
   * (a server that accepts the connection and never answers; the client retries such a request
   * like other timeouts) and between two streamed chunks. The call then ends with `timeout`.
   * Non-streaming requests wait for their headers as long as the client's default (10 minutes)
   * unless this is set, since those come only with the whole reply.
   */
  timeoutMs?: number;
  /**
   * A stream that breaks off (connection lost, or ended without a finish_reason) is requested again
   * from scratch when it has not yet yielded a text or thinking delta. Default false: once deltas
   * were yielded, the call ends with `stream_incomplete`. True retries those too: the deltas already
   * yielded may then be repeated by the retry (consumers of deltas, e.g. `message_delta` events, see
   * them twice), while the final reply (`done`, hence the `message` event and the history) holds only
   * the retry's reply.
   */
  retryPartialStreams?: boolean;
  /** Default true; false sends a non-streaming request. */
  stream?: boolean;
  /**
   * Bring your own client (e.g. `AzureOpenAI`); `apiKey`/`baseURL`/`azure` are then ignored, and its
   * own `fetch` is used (a 500 that will repeat is then retried like any other).
   */
  client?: OpenAI;
  /**
   * The fetch the SDK client sends its requests with (default: the global one): how a run is
   * recorded and replayed at the HTTP boundary (`recorder`, `replayModel`). Not with `client`.
   */
  fetch?: typeof fetch;
  /** Extra request-body fields (temperature, reasoning_effort, ...), merged over the defaults. */
  extraBody?: Record<string, unknown>;
  /**
   * Whether the server takes `response_format: { type: "json_schema" }` (OpenAI, Azure, Ollama,
   * vLLM, llama.cpp, LM Studio do): an agent's `outputSchema` is then sent that way, `strict` when
   * the schema allows. Default true; false describes the schema in the system prompt instead
   * (for servers that refuse it, e.g. DeepSeek).
   */
  structuredOutput?: boolean;
  /**
   * Send audio (an MCP tool's audio result) as `input_audio` parts, wav and mp3; other models get a
   * note naming the clip. Default: true for a model id containing "audio" (gpt-4o-audio-preview,
   * gpt-audio...), else false, as other models refuse the request.
   */
  audio?: boolean;
}

/** The `openai` client's error classes, for the shared classification. */
function sdkError(error: unknown): SdkError | undefined {
  if (error instanceof APIUserAbortError) return { kind: "abort" };
  if (error instanceof APIConnectionTimeoutError) return { kind: "connection_timeout" };
  if (error instanceof APIConnectionError) return { kind: "connection" };
  if (!(error instanceof APIError)) return undefined;
  const raw = error.message || error.name;
  // OpenAI sends a string `code` (`context_length_exceeded`); llama.cpp a numeric one and its `type`.
  const code = [typeof error.code === "string" ? error.code : undefined, error.type]
    .filter(Boolean)
    .join(" ");
  const provider = code ? { code } : {};
  // An error chunk inside a 200 stream: its type says whether another request may fare better.
  if (typeof error.status !== "number") {
    const type = error.type && error.type !== "error" ? ` (${error.type})` : "";
    return { kind: "api", detail: `${raw}${type}`, ...provider };
  }
  const contentType = error.headers?.get("content-type");
  return {
    kind: "api",
    status: error.status,
    detail: raw.replace(/^\d{3}\s+/, ""),
    contentType,
    ...provider,
  };
}

/** Classifies anything thrown during a request as a one-line, secret-free `ModelError`. */
export function toModelError(error: unknown, ctx: ModelErrorContext): ModelError {
  return classifyError(error, ctx, sdkError(error));
}

/** The `openai` client of the options (shared with `openAIResponsesModel`); throws when the SDK refuses them. */
export function createClient(options: OpenAIChatModelOptions): OpenAI {
  const envKey = process.env.OPENAI_API_KEY?.trim() || undefined;
  const baseURL = options.baseURL ?? (process.env.OPENAI_BASE_URL?.trim() || undefined);
  const common = {
    maxRetries: options.maxRetries ?? DEFAULT_MAX_RETRIES,
    fetch: options.fetch ? fetchNoRepeatsOver(options.fetch) : fetchNoRepeats,
    // Failures reach the caller as error events; keep the client quiet unless OPENAI_LOG asks.
    ...(process.env.OPENAI_LOG ? {} : { logLevel: "off" as const }),
    ...(options.timeoutMs === undefined ? {} : { timeout: options.timeoutMs }),
  };
  if (options.azure) {
    const apiKey = options.apiKey ?? (process.env.AZURE_OPENAI_API_KEY?.trim() || envKey);
    // The SDK appends `/openai` to an `endpoint`, and takes a `baseURL` as the full prefix.
    const full = baseURL && /\/openai\/?$|\/deployments\//.test(baseURL);
    return new AzureOpenAI({
      ...common,
      apiVersion: options.azure.apiVersion,
      ...(options.azure.deployment ? { deployment: options.azure.deployment } : {}),
      ...(apiKey === undefined ? {} : { apiKey }),
      // `baseURL: null` stops the SDK from also reading OPENAI_BASE_URL, which clashes with `endpoint`.
      ...(baseURL === undefined ? {} : full ? { baseURL } : { endpoint: baseURL, baseURL: null }),
    });
  }
  // Local servers (Ollama, llama.cpp, vLLM) need no key, but the client insists on one.
  const apiKey = options.apiKey ?? (baseURL && !envKey ? "not-needed" : undefined);
  return new OpenAI({
    ...common,
    ...(apiKey === undefined ? {} : { apiKey }),
    ...(options.baseURL === undefined ? {} : { baseURL: options.baseURL }),
  });
}

/**
 * Creates the adapter. Never throws, here or later: a client that cannot be constructed (no API
 * key) becomes an `error` event with code "missing_api_key" on the first `stream()` call.
 *
 * `stream()` yields `thinking_delta` / `text_delta` events as they arrive, then exactly one `done`
 * (the assembled reply) or `error` (codes: `context_length_exceeded` for a prompt longer than the
 * context window, as any provider says it (`isContextOverflow`), `http_<status>`, `provider_error`
 * for an error event inside a 200 stream, `connection`, `timeout` (no response in time, or a stream silent for
 * longer than the idle timeout), `aborted`, `stream_incomplete` when the stream breaks or ends
 * without a finish_reason (after the retries described at `retryPartialStreams`),
 * `invalid_response` (malformed JSON, an HTML page or another body that is not an event stream),
 * `missing_api_key`, `invalid_config`). Error messages are one line, never contain the API key, and
 * summarise an HTML error page by its title. Breaking out of the iteration cancels the request.
 * Non-streaming mode yields a thinking_delta (when the reply has reasoning), a text_delta (when it
 * has content), then `done`. A model at a local base URL (this machine or a private network) has
 * `price` `FREE`, so cost budgets work without a price; the Agent's `prices` override it.
 */
export function openAIChatModel(options: OpenAIChatModelOptions): Model {
  const streaming = options.stream ?? true;
  const streamRetries = options.maxRetries ?? DEFAULT_MAX_RETRIES;
  const cache = chatWireCache();
  let client = options.client;
  let systemRole: SystemRole | undefined;

  /** The events of one request, or for a streaming one what `guardRequest` reads its stream with. */
  function call(
    request: ModelRequest,
    guard: RequestGuard,
  ): Iterable<ModelEvent> | AsyncIterable<ModelEvent> | StreamAttempts {
    let c: OpenAI;
    try {
      client ??= createClient(options);
      c = client;
    } catch (error) {
      if (!(error instanceof OpenAIError && /credential|api.?key/i.test(error.message))) {
        return [{ type: "error", error: clientError(error, guard.ctx.secrets) }];
      }
      const message = options.azure
        ? "No API key for the Azure OpenAI API: set AZURE_OPENAI_API_KEY or OPENAI_API_KEY, or pass apiKey"
        : "No API key for the model API: set OPENAI_API_KEY, or pass --base-url for a local server that needs none";
      return [{ type: "error", error: { code: "missing_api_key", message } }];
    }
    guard.ctx.secrets.push(c.apiKey);
    guard.ctx.baseURL = c.baseURL;
    const requestOptions = sdkRequestOptions(guard, options);
    systemRole ??= options.systemRole ?? defaultSystemRole(options.model, c);
    const body = toChatRequestBody(request, {
      model: options.model,
      stream: streaming,
      systemRole,
      audio: options.audio ?? /audio/i.test(options.model),
      ...(options.parallelToolCalls === undefined ? {} : { parallelToolCalls: options.parallelToolCalls }),
      ...(options.extraBody ? { extraBody: options.extraBody } : {}),
      cache,
    });
    if (!streaming) return complete(c, body, requestOptions, guard);

    const params = body as unknown as OpenAI.Chat.Completions.ChatCompletionCreateParamsStreaming;
    return {
      open: (): Promise<OpenedStream> => c.chat.completions.create(params, requestOptions).withResponse(),
      assembler: () => new ChatStreamAssembler(),
      endedEarly: (received, type) =>
        received === 0 && !type.includes("event-stream")
          ? new ModelFailure(
              "invalid_response",
              `Model API answered a streaming request without an event stream (content-type: ${type || "none"}); try stream: false`,
            )
          : new ModelFailure(
              "stream_incomplete",
              "Model API stream ended before the reply was complete (no finish_reason, no usage)",
            ),
      retries: streamRetries,
      retryPartial: options.retryPartialStreams === true,
      toError: toModelError,
    };
  }

  /** A non-streaming request: the reply's thinking and text as one delta each, then `done`. */
  async function* complete(
    c: OpenAI,
    body: Record<string, unknown>,
    requestOptions: ReturnType<typeof sdkRequestOptions>,
    guard: RequestGuard,
  ): AsyncGenerator<ModelEvent> {
    const params = body as unknown as OpenAI.Chat.Completions.ChatCompletionCreateParamsNonStreaming;
    const completion: unknown = await c.chat.completions.create(params, requestOptions);
    const reply = completionToReply(completion);
    if (!reply) {
      const text = typeof completion === "string" ? completion : "";
      throw new ModelFailure(
        "invalid_response",
        isHtml(text)
          ? `Model API answered with an HTML page (${htmlTitle(text) ?? "no title"}) instead of JSON, probably from a proxy or a wrong base URL`
          : "Model API returned an invalid response: no choices[0].message in the chat.completion body",
      );
    }
    guard.end(); // the whole body was read
    if (reply.thinking) yield { type: "thinking_delta", text: reply.thinking };
    if (reply.content) yield { type: "text_delta", text: reply.content };
    yield { type: "done", message: reply };
  }

  const baseURL = options.client?.baseURL ?? options.baseURL ?? process.env.OPENAI_BASE_URL?.trim();
  return {
    id: options.model,
    ...(isLocalURL(baseURL) && { price: FREE }),
    structuredOutput: options.structuredOutput ?? true,
    provider: options.azure || options.client instanceof AzureOpenAI ? "azure.ai.openai" : "openai",
    ...(!options.client && {
      withFetch: (fetch: typeof globalThis.fetch) => openAIChatModel({ ...options, fetch }),
    }),
    ...((baseURL || !options.azure) && { baseURL: baseURL || "https://api.openai.com/v1" }),
    stream: (request, streamOptions) => {
      const { apiKey, headers } = options;
      // Non-streaming answers send their headers only once the whole reply is written.
      const timeoutMs = options.timeoutMs ?? (streaming ? DEFAULT_IDLE_TIMEOUT_MS : undefined);
      const guard = { credentials: [apiKey], headers, timeoutMs, attempts: streamOptions?.attempts };
      return guardRequest(streamOptions?.signal, guard, toModelError, (g) => call(request, g));
    },
  };
}
