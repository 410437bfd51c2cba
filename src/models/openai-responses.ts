import type OpenAI from "openai";
import type { Model, ModelEvent, ModelRequest } from "./adapter.js";
import { ModelFailure } from "./model-errors.js";
import { createClient, type OpenAIChatModelOptions, toModelError } from "./openai-chat.js";
import { responsesWireCache, toResponsesRequestBody } from "./openai-responses-wire.js";
import { FREE, isLocalURL } from "./pricing.js";
import {
  clientError,
  DEFAULT_IDLE_TIMEOUT_MS,
  guardRequest,
  type RequestGuard,
  sdkRequestOptions,
} from "./request-guard.js";
import { ResponsesStreamAssembler } from "./responses-assembler.js";
import { DEFAULT_MAX_RETRIES, type OpenedStream, type StreamAttempts } from "./stream-retry.js";

/**
 * The OpenAI Responses API adapter (`POST /v1/responses`: api.openai.com, and servers that speak
 * it: Azure OpenAI's v1 API, xAI, LM Studio, Ollama, vLLM, OpenRouter, GitHub Copilot...). HTTP,
 * SSE parsing and retries are the official `openai` client's, as for `openAIChatModel`.
 *
 * Stateless: every request sends the whole conversation with `store: false`; a reasoning model's
 * encrypted reasoning (`include: ["reasoning.encrypted_content"]`) is kept on the assistant
 * message (`providerData["openai-responses"]`) and sent back with it, so the model keeps its
 * chain of thought across tool calls without the provider storing anything.
 */
export interface OpenAIResponsesModelOptions
  extends Pick<
    OpenAIChatModelOptions,
    | "model"
    | "apiKey"
    | "baseURL"
    | "headers"
    | "maxRetries"
    | "timeoutMs"
    | "retryPartialStreams"
    | "client"
    | "fetch"
  > {
  /**
   * Sent as `reasoning` (`{ effort: "low", summary: "detailed" }`), together with
   * `include: ["reasoning.encrypted_content"]`. Default `{ summary: "auto" }` (reasoning summaries
   * stream as thinking) for OpenAI reasoning models (ids starting o1, o3, o4, gpt-5 or later,
   * codex, except `-chat` ones), else nothing; `{}` asks for encrypted reasoning from another
   * reasoning model, `false` sends no reasoning settings. Without settings, `include` is still
   * sent once the history holds encrypted reasoning (a model id not recognised, such as an Azure
   * deployment name), unless this is `false`.
   */
  reasoning?: { effort?: string; summary?: "auto" | "concise" | "detailed" | null } | false;
  /** Sent as `parallel_tool_calls` when the request has tools. Default: not sent (the provider's default). */
  parallelToolCalls?: boolean;
  /** Default true; false sends a non-streaming request. */
  stream?: boolean;
  /**
   * Whether an agent's `outputSchema` goes as `text.format` json_schema (the provider constrains
   * the answer). Default true; false describes the schema in the system prompt instead.
   */
  structuredOutput?: boolean;
  /** Extra request-body fields (`max_output_tokens`, `text`, `service_tier`, ...), merged over the defaults. */
  extraBody?: Record<string, unknown>;
}

/**
 * Creates the adapter. Never throws, here or later: a client that cannot be constructed (no API
 * key) becomes an `error` event with code "missing_api_key" on the first `stream()` call.
 *
 * `stream()` yields `thinking_delta` / `text_delta` events as they arrive, then exactly one `done`
 * (the assembled reply, see `ResponsesStreamAssembler`) or `error`: codes as `openAIChatModel`'s
 * (`context_length_exceeded`, `http_<status>`, `connection`, `timeout`, `aborted`, `invalid_response`, `missing_api_key`,
 * `invalid_config`), plus `provider_error` for a `response.failed` or an `error` event inside a
 * 200 stream (the provider's message and code), and `stream_incomplete` for a stream that breaks
 * or ends without `response.completed` (or `response.incomplete`), after the retries described at
 * `retryPartialStreams`. An incomplete response (`max_output_tokens`, `content_filter`) is a
 * reply, whose `finishReason` says why. A model at a local base URL has `price` `FREE`.
 */
export function openAIResponsesModel(options: OpenAIResponsesModelOptions): Model {
  const streaming = options.stream ?? true;
  const cache = responsesWireCache();
  let client = options.client;

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
      if (!(error instanceof Error && /credential|api.?key/i.test(error.message))) {
        return [{ type: "error", error: clientError(error, guard.ctx.secrets) }];
      }
      const message =
        "No API key for the model API: set OPENAI_API_KEY, or pass --base-url for a local server that needs none";
      return [{ type: "error", error: { code: "missing_api_key", message } }];
    }
    guard.ctx.secrets.push(c.apiKey);
    guard.ctx.baseURL = c.baseURL;
    const requestOptions = sdkRequestOptions(guard, options);
    const body = toResponsesRequestBody(request, {
      model: options.model,
      stream: streaming,
      ...(options.reasoning !== undefined && { reasoning: options.reasoning }),
      ...(options.parallelToolCalls !== undefined && { parallelToolCalls: options.parallelToolCalls }),
      ...(options.extraBody && { extraBody: options.extraBody }),
      cache,
    });
    if (!streaming) return complete(c, body, requestOptions, guard);

    const params = body as unknown as OpenAI.Responses.ResponseCreateParamsStreaming;
    return {
      open: (): Promise<OpenedStream> => c.responses.create(params, requestOptions).withResponse(),
      assembler: () => new ResponsesStreamAssembler(),
      endedEarly: (received, type) =>
        received === 0 && !type.includes("event-stream")
          ? new ModelFailure(
              "invalid_response",
              `Model API answered a streaming request without an event stream (content-type: ${type || "none"}); try stream: false`,
            )
          : new ModelFailure(
              "stream_incomplete",
              "Model API stream ended before the response was complete (no response.completed event)",
            ),
      retries: options.maxRetries ?? DEFAULT_MAX_RETRIES,
      retryPartial: options.retryPartialStreams === true,
      toError: toModelError,
    };
  }

  /** A non-streaming request: the response's deltas as the assembler gives them, then `done`. */
  async function* complete(
    c: OpenAI,
    body: Record<string, unknown>,
    requestOptions: ReturnType<typeof sdkRequestOptions>,
    guard: RequestGuard,
  ): AsyncGenerator<ModelEvent> {
    const params = body as unknown as OpenAI.Responses.ResponseCreateParamsNonStreaming;
    const response: unknown = await c.responses.create(params, requestOptions);
    if (
      typeof response !== "object" ||
      response === null ||
      !Array.isArray((response as { output?: unknown }).output)
    ) {
      throw new ModelFailure(
        "invalid_response",
        "Model API returned an invalid response: no output list in the response body",
      );
    }
    guard.end(); // the whole body was read
    const assembler = new ResponsesStreamAssembler();
    yield* assembler.pushResponse(response);
    yield { type: "done", message: assembler.reply() };
  }

  const baseURL = options.client?.baseURL ?? options.baseURL ?? process.env.OPENAI_BASE_URL?.trim();
  const model: Model & { structuredOutput: boolean } = {
    id: options.model,
    ...(isLocalURL(baseURL) && { price: FREE }),
    structuredOutput: options.structuredOutput ?? true,
    provider: "openai",
    baseURL: baseURL || "https://api.openai.com/v1",
    ...(!options.client && {
      withFetch: (fetch: typeof globalThis.fetch) => openAIResponsesModel({ ...options, fetch }),
    }),
    stream: (request, streamOptions) => {
      const { apiKey, headers } = options;
      const timeoutMs = options.timeoutMs ?? (streaming ? DEFAULT_IDLE_TIMEOUT_MS : undefined);
      const guard = { credentials: [apiKey], headers, timeoutMs, attempts: streamOptions?.attempts };
      return guardRequest(streamOptions?.signal, guard, toModelError, (g) => call(request, g));
    },
  };
  return model;
}
