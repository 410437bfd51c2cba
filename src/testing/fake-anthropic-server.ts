import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Usage } from "../core/messages.js";
import type { FakeRequest } from "./fake-openai-server.js";

export type { FakeRequest } from "./fake-openai-server.js";

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

/** Any response: a scripted reply or one of the faults. */
export type FakeAnthropicResponse =
  | FakeAnthropicReply
  /** An HTTP error; the default body is Anthropic's `{"type":"error","error":{"type","message"}}`. */
  | { status: number; headers?: Record<string, string>; body?: string }
  /** These bytes as-is (e.g. a recorded fixture); content type SSE unless they start with `{`. */
  | { raw: string; status?: number; headers?: Record<string, string> }
  /** Streams `message_start`, a text block with `afterText`, then destroys the socket (no message_stop). */
  | { breakOff: true; afterText?: string }
  /** Streams `message_start`, a text block with `afterText`, then nothing more until the client goes away. */
  | { stall: true; afterText?: string };

export type FakeAnthropicResponder =
  | ((request: FakeRequest, index: number) => FakeAnthropicResponse | Promise<FakeAnthropicResponse>)
  | readonly FakeAnthropicResponse[];

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

const tokens = (text: string): number => Math.max(1, Math.ceil(text.length / 4));

/** Text as small deltas of a word each (leading whitespace kept, like real tokens). */
const words = (text: string): string[] => text.match(/\s*\S+|\s+$/g) ?? [];

function pieces(text: string): string[] {
  const size = Math.max(4, Math.ceil(text.length / 6));
  const out: string[] = [];
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size));
  return out;
}

const sse = (type: string, data: Record<string, unknown>) =>
  `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;

function sendJson(res: ServerResponse, status: number, value: unknown, headers: Record<string, string> = {}) {
  res.writeHead(status, { "content-type": "application/json", ...headers });
  res.end(JSON.stringify(value));
}

function errorBody(message: string, status = 500) {
  return { type: "error", error: { type: ERROR_TYPES[status] ?? "api_error", message } };
}

export async function startFakeAnthropicServer(options: {
  respond: FakeAnthropicResponder;
}): Promise<FakeAnthropicServer> {
  const requests: FakeRequest[] = [];
  const { respond } = options;

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
      for (const p of ["", ...pieces(c.json)]) delta({ type: "input_json_delta", partial_json: p });
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

  const answer = (res: ServerResponse, request: FakeRequest, index: number, r: FakeAnthropicResponse) => {
    if ("raw" in r) {
      const type = r.raw.trimStart().startsWith("{") ? "application/json" : "text/event-stream";
      res.writeHead(r.status ?? 200, { "content-type": type, ...r.headers });
      res.end(r.raw);
    } else if ("status" in r) {
      const body = r.body ?? JSON.stringify(errorBody(`Fake server error (HTTP ${r.status})`, r.status));
      res.writeHead(r.status, {
        "content-type": "application/json",
        "request-id": `req_fake_${index}`,
        ...r.headers,
      });
      res.end(body);
    } else if ("breakOff" in r || "stall" in r) {
      const usage = { input_tokens: 1, output_tokens: 1 };
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write(messageStart(index, String(request.body?.model ?? "claude-fake"), usage));
      res.write(sse("content_block_start", { index: 0, content_block: { type: "text", text: "" } }));
      for (const t of words(r.afterText ?? ""))
        res.write(sse("content_block_delta", { index: 0, delta: { type: "text_delta", text: t } }));
      // Destroy only after the events were flushed, so the client sees them before the break.
      if ("breakOff" in r) setTimeout(() => res.socket?.destroy(), 20);
    } else reply(res, request, index, r);
  };

  const server = createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on("data", (d: Buffer) => parts.push(d));
    req.on("end", async () => {
      const path = (req.url ?? "/").split("?")[0] ?? "/";
      if (req.method !== "POST" || path !== "/v1/messages") {
        sendJson(res, 404, errorBody(`Fake Anthropic server: no route ${req.method} ${path}`, 404));
        return;
      }
      const text = Buffer.concat(parts).toString("utf8");
      let body: unknown;
      try {
        body = text ? JSON.parse(text) : undefined;
      } catch {
        body = text;
      }
      const request: FakeRequest = { method: req.method, path, headers: req.headers, body };
      const index = requests.push(request) - 1;
      const noRetry = { "x-should-retry": "false" };
      try {
        const r = typeof respond === "function" ? await respond(request, index) : respond[index];
        if (r === undefined) {
          const count = typeof respond === "function" ? 0 : respond.length;
          const message = `Fake Anthropic server: no scripted response for request #${index + 1} (only ${count} given)`;
          sendJson(res, 500, errorBody(message), noRetry);
          return;
        }
        answer(res, request, index, r);
      } catch (error) {
        const message = `Fake Anthropic server: respond() threw: ${error instanceof Error ? error.message : String(error)}`;
        sendJson(res, 500, errorBody(message), noRetry);
      }
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
