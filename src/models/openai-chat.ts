import OpenAI, {
  APIConnectionError,
  APIConnectionTimeoutError,
  APIError,
  APIUserAbortError,
  OpenAIError,
} from "openai";
import type { Message } from "../core/messages.js";
import { redactSecrets } from "../core/redact.js";
import type { Model, ModelError, ModelEvent, ModelRequest } from "./adapter.js";
import { ChatStreamAssembler, completionToReply } from "./chat-assembler.js";

/**
 * The OpenAI-compatible Chat Completions adapter (OpenAI, Azure OpenAI, AI DIAL, Ollama, vLLM,
 * llama.cpp server, LM Studio, OpenRouter, groq, DeepSeek...). HTTP, SSE parsing and retries are
 * the official `openai` client's: it retries 408/409/429/5xx and connection errors with
 * exponential backoff and jitter, honouring `Retry-After` / `retry-after-ms`, and never 400/401/404.
 */
export interface OpenAIChatModelOptions {
  /** The model id sent to the provider (an Azure deployment name with an `AzureOpenAI` client). */
  model: string;
  /** Defaults to `OPENAI_API_KEY`; with a `baseURL` and no key at all, a placeholder is sent. */
  apiKey?: string;
  /** E.g. `http://localhost:11434/v1`. Defaults to `OPENAI_BASE_URL`, then api.openai.com. */
  baseURL?: string;
  /** Extra HTTP headers sent with every request. */
  headers?: Record<string, string>;
  /** Retries of failed requests (default 3). */
  maxRetries?: number;
  /** Time to the response headers per attempt, and the longest silence between two streamed chunks. */
  timeoutMs?: number;
  /** Default true; false sends a non-streaming request. */
  stream?: boolean;
  /** Bring your own client (e.g. `AzureOpenAI`); `apiKey`/`baseURL` are then ignored. */
  client?: OpenAI;
  /** Extra request-body fields (temperature, reasoning_effort, ...), merged over the defaults. */
  extraBody?: Record<string, unknown>;
}

const DEFAULT_MAX_RETRIES = 3;
const MAX_MESSAGE_LENGTH = 1000;

type WireMessage = OpenAI.Chat.Completions.ChatCompletionMessageParam;
type WireTool = OpenAI.Chat.Completions.ChatCompletionFunctionTool;

/** Maps the runtime messages to Chat Completions messages (system first when non-empty). */
export function toChatMessages(system: string, messages: readonly Message[]): WireMessage[] {
  const out: WireMessage[] = [];
  if (system) out.push({ role: "system", content: system });
  for (const m of messages) {
    if (m.role === "user") out.push({ role: "user", content: m.content });
    else if (m.role === "tool") out.push({ role: "tool", tool_call_id: m.toolCallId, content: m.content });
    else if (m.toolCalls && m.toolCalls.length > 0) {
      out.push({
        role: "assistant",
        content: m.content || null,
        tool_calls: m.toolCalls.map((c) => ({
          id: c.id,
          type: "function" as const,
          // Some servers reject an empty arguments string; "{}" means the same.
          function: { name: c.name, arguments: c.arguments || "{}" },
        })),
      });
    } else out.push({ role: "assistant", content: m.content });
  }
  return out;
}

/** The request body: model, messages, tools (omitted when empty), stream flags, then `extraBody`. */
export function toChatRequestBody(
  model: string,
  request: ModelRequest,
  stream: boolean,
  extraBody?: Record<string, unknown>,
): Record<string, unknown> {
  const tools: WireTool[] = request.tools.map((t) => ({
    type: "function",
    function: { name: t.name, description: t.description, parameters: t.parameters },
  }));
  return {
    model,
    messages: toChatMessages(request.system, request.messages),
    ...(tools.length > 0 ? { tools } : {}),
    ...(stream ? { stream_options: { include_usage: true } } : {}),
    ...extraBody,
    stream,
  };
}

/** The innermost useful message of an error's `cause` chain, e.g. "connect ECONNREFUSED 127.0.0.1:1". */
function causeDetail(error: unknown): { message?: string; code?: string } {
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

/** What `toModelError` needs to know about the request that failed. */
export interface ModelErrorContext {
  aborted: boolean;
  idleTimedOut: boolean;
  streaming: boolean;
  timeoutMs?: number;
  secrets: (string | null | undefined)[];
}

/** Classifies anything thrown during a request as a one-line, secret-free `ModelError`. */
export function toModelError(error: unknown, ctx: ModelErrorContext): ModelError {
  const make = (code: string, message: string, status?: number): ModelError => {
    let text = redactSecrets(message.replace(/\s+/g, " ").trim(), ctx.secrets);
    if (text.length > MAX_MESSAGE_LENGTH) text = `${text.slice(0, MAX_MESSAGE_LENGTH - 3)}...`;
    return status === undefined ? { code, message: text } : { code, message: text, status };
  };
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
    if (typeof error.status === "number") {
      let detail = raw
        .replace(/^\d{3}\s+/, "")
        .replace(/^status code \(no body\)$/, "no error message in the body");
      if (error.status === 401) detail += " (check the API key)";
      if (error.status === 404) detail += " (check the model id and the base URL)";
      return make(`http_${error.status}`, `Model API error (HTTP ${error.status}): ${detail}`, error.status);
    }
    return make("provider_error", `Model API error: ${raw}`);
  }
  if (error instanceof SyntaxError)
    return make("invalid_response", `Model API returned an invalid response: ${raw}`);
  if (cause.code === "UND_ERR_BODY_TIMEOUT" || cause.code === "UND_ERR_HEADERS_TIMEOUT") {
    return make("timeout", `Model API request timed out: ${cause.message ?? raw}`);
  }
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
 * (the assembled reply) or `error` (codes: `http_<status>`, `provider_error` for an error event
 * inside a 200 stream, `connection`, `timeout`, `aborted`, `stream_incomplete` when the stream
 * ends or breaks without a finish_reason, `invalid_response`, `missing_api_key`). Error messages
 * are one line and never contain the API key. Breaking out of the iteration cancels the request.
 * Non-streaming mode yields a thinking_delta (when the reply has reasoning), a text_delta (when it
 * has content), then `done`.
 */
export function openAIChatModel(options: OpenAIChatModelOptions): Model {
  const streaming = options.stream ?? true;
  let client = options.client;
  const getClient = (): OpenAI => {
    if (client) return client;
    const envKey = process.env.OPENAI_API_KEY?.trim();
    const baseURL = options.baseURL ?? (process.env.OPENAI_BASE_URL?.trim() || undefined);
    // Local servers (Ollama, llama.cpp, vLLM) need no key, but the client insists on one.
    const apiKey = options.apiKey ?? (baseURL && !envKey ? "not-needed" : undefined);
    client = new OpenAI({
      ...(apiKey === undefined ? {} : { apiKey }),
      ...(options.baseURL === undefined ? {} : { baseURL: options.baseURL }),
      maxRetries: options.maxRetries ?? DEFAULT_MAX_RETRIES,
      // Failures reach the caller as error events; keep the client quiet unless OPENAI_LOG asks.
      ...(process.env.OPENAI_LOG ? {} : { logLevel: "off" as const }),
      ...(options.timeoutMs === undefined ? {} : { timeout: options.timeoutMs }),
    });
    return client;
  };

  async function* stream(request: ModelRequest, signal?: AbortSignal): AsyncGenerator<ModelEvent> {
    const ctx: ModelErrorContext = {
      aborted: false,
      idleTimedOut: false,
      streaming: false,
      timeoutMs: options.timeoutMs,
      // The key, and any credential-looking header value, never appear in a message.
      secrets: [
        options.apiKey,
        ...Object.entries(options.headers ?? {})
          .filter(([name]) => /auth|key|token|secret|cookie/i.test(name))
          .map(([, value]) => value),
      ],
    };
    if (signal?.aborted) {
      yield { type: "error", error: toModelError(new APIUserAbortError(), { ...ctx, aborted: true }) };
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
      let c: OpenAI;
      try {
        c = getClient();
      } catch (error) {
        const missing = error instanceof OpenAIError && /credential|api.?key/i.test(error.message);
        const message = missing
          ? "No API key for the model API: set OPENAI_API_KEY, or pass --base-url for a local server that needs none"
          : `Cannot create the model API client: ${error instanceof Error ? error.message : String(error)}`;
        yield { type: "error", error: { code: missing ? "missing_api_key" : "invalid_config", message } };
        return;
      }
      ctx.secrets.push(c.apiKey);
      const requestOptions = {
        signal: controller.signal,
        ...(options.headers ? { headers: options.headers } : {}),
        ...(options.maxRetries === undefined ? {} : { maxRetries: options.maxRetries }),
        ...(options.timeoutMs === undefined ? {} : { timeout: options.timeoutMs }),
      };
      const body = toChatRequestBody(options.model, request, streaming, options.extraBody);

      if (!streaming) {
        const params = body as unknown as OpenAI.Chat.Completions.ChatCompletionCreateParamsNonStreaming;
        const completion: unknown = await c.chat.completions.create(params, requestOptions);
        const reply = completionToReply(completion);
        if (!reply) throw new SyntaxError("no choices[0].message in the chat.completion body");
        if (reply.thinking) yield { type: "thinking_delta", text: reply.thinking };
        if (reply.content) yield { type: "text_delta", text: reply.content };
        yield { type: "done", message: reply };
        return;
      }

      const params = body as unknown as OpenAI.Chat.Completions.ChatCompletionCreateParamsStreaming;
      const { data: chunks, response } = await c.chat.completions
        .create(params, requestOptions)
        .withResponse();
      ctx.streaming = true;
      const assembler = new ChatStreamAssembler();
      let received = 0;
      arm();
      // The timer only runs while we wait for the next chunk, never while the consumer works.
      for await (const chunk of chunks) {
        received++;
        disarm();
        for (const event of assembler.push(chunk)) yield event;
        arm();
      }
      disarm();
      // The client ends the iteration quietly (no throw) when its signal fires mid-stream.
      if (controller.signal.aborted) throw new APIUserAbortError();
      if (!assembler.complete) {
        const type = response.headers.get("content-type") ?? "none";
        const message =
          received === 0 && !type.includes("event-stream")
            ? `Model API answered a streaming request without an event stream (content-type: ${type}); try stream: false`
            : "Model API stream ended before the reply was complete (no finish_reason, no usage)";
        yield { type: "error", error: { code: "stream_incomplete", message } };
        return;
      }
      yield { type: "done", message: assembler.reply() };
    } catch (error) {
      yield { type: "error", error: toModelError(error, ctx) };
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
