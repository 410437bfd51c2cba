import type { ServerResponse } from "node:http";
import type { Usage } from "../core/messages.js";
import type { FakeFault, FakeProtocol, FakeRequest, FakeResponderOf } from "./fake-http.js";
import { pieces, sendJson, startFakeHttpServer, tokens, words } from "./fake-http.js";

/**
 * A fake Anthropic Messages server on 127.0.0.1 (random port) for tests, the sibling of
 * `startFakeOpenAIServer`. `POST /v1/messages` answers with what `respond` returns. Scripted replies
 * stream the real event sequence (`message_start`; per block `content_block_start`, deltas and
 * `content_block_stop`: thinking with its `signature_delta`, text in word-sized `text_delta`s,
 * each tool_use with its input as several `input_json_delta` pieces after an empty one; a `ping`
 * after the first block starts; `message_delta` with `stop_reason` and usage; `message_stop`), or
 * come back as one `message` JSON object when the request has no `stream: true`.
 */
export interface FakeAnthropicToolCall {
  /** Default `toolu_fake_<request index>_<call index>`. */
  id?: string;
  name: string;
  /** An object (serialised), or the raw JSON text to stream (possibly invalid). */
  input: object | string;
}

export interface FakeAnthropicReply {
  text?: string;
  /** A thinking block before everything else. */
  thinking?: string;
  /** The thinking block's signature; default `sig_fake_<request index>` when there is thinking. */
  signature?: string;
  toolCalls?: FakeAnthropicToolCall[];
  /**
   * In the runtime's terms: `inputTokens` includes `cachedInputTokens`; sent as `input_tokens` =
   * inputTokens - cachedInputTokens and `cache_read_input_tokens`. Default: about 4 characters a
   * token of the request and of the reply.
   */
  usage?: Partial<Usage>;
  /** Default "tool_use" when there are tool calls, else "end_turn". */
  stopReason?: string;
}

/**
 * Any response: a scripted reply or one of the faults (see `FakeFault`; an HTTP error's default
 * body is Anthropic's `{"type":"error","error":{"type","message"}}` with a `request-id` header, the
 * partial streams start with `message_start` and a text block's `content_block_start`).
 */
export type FakeAnthropicResponse = FakeAnthropicReply | FakeFault;

export type FakeAnthropicResponder = FakeResponderOf<FakeAnthropicResponse>;

export interface FakeAnthropicServer {
  /** Base URL for the SDK (no `/v1`), e.g. `http://127.0.0.1:54321`. */
  readonly url: string;
  /** Every `/v1/messages` request received, in order. */
  readonly requests: FakeRequest[];
  close(): Promise<void>;
}

const ERROR_TYPES: Record<number, string> = {
  400: "invalid_request_error",
  401: "authentication_error",
  402: "billing_error",
  403: "permission_error",
  404: "not_found_error",
  413: "request_too_large",
  429: "rate_limit_error",
  504: "timeout_error",
  529: "overloaded_error",
};

const sse = (type: string, data: Record<string, unknown>) =>
  `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;

function errorBody(message: string, status = 500) {
  return { type: "error", error: { type: ERROR_TYPES[status] ?? "api_error", message } };
}

export async function startFakeAnthropicServer(options: {
  respond: FakeAnthropicResponder;
}): Promise<FakeAnthropicServer> {
  const messageStart = (index: number, model: string, usage: Record<string, unknown>) =>
    sse("message_start", {
      message: {
        id: `msg_fake_${index}`,
        type: "message",
        role: "assistant",
        model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage,
      },
    });

  const reply = (res: ServerResponse, request: FakeRequest, index: number, r: FakeAnthropicReply) => {
    const body = request.body ?? {};
    const model = String(body.model ?? "claude-fake");
    const calls = (r.toolCalls ?? []).map((c, i) => ({
      id: c.id ?? `toolu_fake_${index}_${i}`,
      name: c.name,
      json: typeof c.input === "string" ? c.input : JSON.stringify(c.input),
    }));
    const signature = r.thinking === undefined ? undefined : (r.signature ?? `sig_fake_${index}`);
    const outText = (r.text ?? "") + (r.thinking ?? "") + calls.map((c) => c.name + c.json).join("");
    const u = r.usage ?? {};
    const cached = u.cachedInputTokens ?? 0;
    const input =
      u.inputTokens ?? tokens(JSON.stringify([body.system ?? "", body.messages ?? [], body.tools ?? []]));
    const output = u.outputTokens ?? tokens(outText);
    const usage: Record<string, unknown> = {
      input_tokens: Math.max(0, input - cached),
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: cached,
      output_tokens: output,
    };
    const stopReason = r.stopReason ?? (calls.length > 0 ? "tool_use" : "end_turn");

    if (body.stream !== true) {
      const content: unknown[] = [];
      if (r.thinking !== undefined) content.push({ type: "thinking", thinking: r.thinking, signature });
      if (r.text) content.push({ type: "text", text: r.text, citations: null });
      for (const c of calls) {
        let parsed: unknown = {};
        try {
          parsed = JSON.parse(c.json || "{}");
        } catch {}
        content.push({ type: "tool_use", id: c.id, name: c.name, input: parsed });
      }
      const message = { id: `msg_fake_${index}`, type: "message", role: "assistant", model, content };
      sendJson(res, 200, { ...message, stop_reason: stopReason, stop_sequence: null, usage });
      return;
    }
    let out = messageStart(index, model, { ...usage, output_tokens: 1 });
    let block = 0;
    const open = (contentBlock: Record<string, unknown>) => {
      out += sse("content_block_start", { index: block, content_block: contentBlock });
      if (block === 0) out += sse("ping", {});
    };
    const delta = (d: Record<string, unknown>) => {
      out += sse("content_block_delta", { index: block, delta: d });
    };
    const close = () => {
      out += sse("content_block_stop", { index: block });
      block++;
    };
    if (r.thinking !== undefined) {
      open({ type: "thinking", thinking: "", signature: "" });
      for (const t of words(r.thinking)) delta({ type: "thinking_delta", thinking: t });
      delta({ type: "signature_delta", signature });
      close();
    }
    if (r.text) {
      open({ type: "text", text: "" });
      for (const t of words(r.text)) delta({ type: "text_delta", text: t });
      close();
    }
    for (const c of calls) {
      open({ type: "tool_use", id: c.id, name: c.name, input: {} });
      for (const p of ["", ...pieces(c.json, 6)]) delta({ type: "input_json_delta", partial_json: p });
      close();
    }
    out += sse("message_delta", {
      delta: { stop_reason: stopReason, stop_sequence: null },
      usage: { output_tokens: output },
    });
    out += sse("message_stop", {});
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    res.end(out);
  };

  const protocol: FakeProtocol<FakeAnthropicReply> = {
    name: "Fake Anthropic server",
    route: (method, path, res) => {
      if (method === "POST" && path === "/v1/messages") return true;
      sendJson(res, 404, errorBody(`Fake Anthropic server: no route ${method} ${path}`, 404));
      return false;
    },
    errorBody,
    faultHeaders: (index) => ({ "request-id": `req_fake_${index}` }),
    partialStart: (request, index) =>
      messageStart(index, String(request.body?.model ?? "claude-fake"), {
        input_tokens: 1,
        output_tokens: 1,
      }) + sse("content_block_start", { index: 0, content_block: { type: "text", text: "" } }),
    partialText: (text) => sse("content_block_delta", { index: 0, delta: { type: "text_delta", text } }),
    reply,
  };

  const server = await startFakeHttpServer(options.respond, protocol);
  return { url: server.origin, requests: server.requests, close: server.close };
}
