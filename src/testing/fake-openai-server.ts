import { createServer, type IncomingHttpHeaders, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Usage } from "../core/messages.js";

/**
 * A fake OpenAI-compatible Chat Completions server on 127.0.0.1 (random port) for tests.
 * `POST /v1/chat/completions` (and the Azure / AI DIAL path `/openai/deployments/<name>/chat/completions`)
 * answers with what `respond` returns; `GET /v1/models` lists one model.
 * Scripted replies stream the way real servers do (role chunk, text in several small deltas, each
 * tool call's arguments over several chunks with `id` and `name` only on the first, a finish chunk,
 * an empty-choices usage chunk when `stream_options.include_usage` was sent, `data: [DONE]`), or
 * come back as one `chat.completion` when the request has no `stream: true`.
 */
export interface FakeToolCall {
  /** Default `call_<request index>_<call index>`. */
  id?: string;
  name: string;
  /** A JSON string, or an object that is serialised. */
  arguments: string | object;
}

export interface FakeReply {
  text?: string;
  /** Streamed as `delta.reasoning_content` (in `message.reasoning_content` when not streaming). */
  reasoning?: string;
  toolCalls?: FakeToolCall[];
  /** Default: about 4 characters a token of the request and of the reply. */
  usage?: Partial<Usage>;
  /** Default "tool_calls" when there are tool calls, else "stop". */
  finishReason?: string;
  /** Streaming only: text written verbatim after the role chunk, e.g. a malformed SSE line. */
  inject?: string;
}

/** Any response: a scripted reply or one of the faults. */
export type FakeResponse =
  | FakeReply
  /** An HTTP error; the default body is an OpenAI-style `{"error":{...}}`. */
  | { status: number; headers?: Record<string, string>; body?: string }
  /** These bytes as-is (e.g. a recorded fixture); content type SSE unless they start with `{`. */
  | { raw: string; status?: number; headers?: Record<string, string> }
  /** Streams a role chunk and `afterText`, then destroys the socket (no finish, no [DONE]). */
  | { breakOff: true; afterText?: string }
  /** Streams a role chunk and `afterText`, then sends nothing more until the client goes away. */
  | { stall: true; afterText?: string }
  /** Streams a role chunk and `afterText`, then half of the next chunk's line, then destroys the socket. */
  | { cutMidChunk: true; afterText?: string }
  /** Destroys the socket before sending anything (no status line, no headers). */
  | { reset: true };

export interface FakeRequest {
  method: string;
  path: string;
  /** The query parameters, e.g. `{ "api-version": "2024-10-21" }` (always set by this server). */
  query?: Record<string, string>;
  /** Lower-case header names. */
  headers: IncomingHttpHeaders;
  // biome-ignore lint/suspicious/noExplicitAny: a parsed JSON body of any shape
  body: any;
}

export type FakeResponder =
  | ((request: FakeRequest, index: number) => FakeResponse | Promise<FakeResponse>)
  | readonly FakeResponse[];

export interface FakeOpenAIServer {
  /** Base URL ending in `/v1`, e.g. `http://127.0.0.1:54321/v1`. */
  readonly url: string;
  /** The server's root, e.g. `http://127.0.0.1:54321` (an Azure-style base URL). */
  readonly origin: string;
  /** Every chat-completions request received, in order. */
  readonly requests: FakeRequest[];
  close(): Promise<void>;
}

const tokens = (text: string): number => Math.max(1, Math.ceil(text.length / 4));

/** Text as small deltas of a word each (leading whitespace kept, like real tokens). */
const words = (text: string): string[] => text.match(/\s*\S+|\s+$/g) ?? [];

function pieces(text: string): string[] {
  const size = Math.max(4, Math.ceil(text.length / 8));
  const out: string[] = [];
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size));
  return out;
}

function sendJson(res: ServerResponse, status: number, value: unknown, headers: Record<string, string> = {}) {
  res.writeHead(status, { "content-type": "application/json", ...headers });
  res.end(JSON.stringify(value));
}

function errorBody(message: string, type = "server_error") {
  return { error: { message, type, param: null, code: null } };
}

export async function startFakeOpenAIServer(options: { respond: FakeResponder }): Promise<FakeOpenAIServer> {
  const requests: FakeRequest[] = [];
  const { respond } = options;
  let created = Math.floor(Date.now() / 1000);

  const reply = (res: ServerResponse, request: FakeRequest, index: number, r: FakeReply) => {
    const body = request.body ?? {};
    const calls = (r.toolCalls ?? []).map((c, i) => ({
      id: c.id ?? `call_${index}_${i}`,
      name: c.name,
      arguments: typeof c.arguments === "string" ? c.arguments : JSON.stringify(c.arguments),
    }));
    const outText = (r.text ?? "") + (r.reasoning ?? "") + calls.map((c) => c.name + c.arguments).join("");
    const u = r.usage ?? {};
    const usage: Record<string, unknown> = {
      prompt_tokens: u.inputTokens ?? tokens(JSON.stringify(body.messages ?? [])),
      completion_tokens: u.outputTokens ?? tokens(outText),
    };
    usage.total_tokens = (usage.prompt_tokens as number) + (usage.completion_tokens as number);
    if (u.cachedInputTokens !== undefined)
      usage.prompt_tokens_details = { cached_tokens: u.cachedInputTokens };
    if (u.reasoningTokens !== undefined)
      usage.completion_tokens_details = { reasoning_tokens: u.reasoningTokens };
    const finish = r.finishReason ?? (calls.length > 0 ? "tool_calls" : "stop");
    const base = {
      id: `chatcmpl-fake-${index}`,
      created: created++,
      model: String(body.model ?? "fake-model"),
    };

    if (body.stream !== true) {
      const message: Record<string, unknown> = {
        role: "assistant",
        content: r.text ?? (calls.length > 0 ? null : ""),
      };
      if (r.reasoning) message.reasoning_content = r.reasoning;
      if (calls.length > 0) {
        message.tool_calls = calls.map((c) => ({
          id: c.id,
          type: "function",
          function: { name: c.name, arguments: c.arguments },
        }));
      }
      const choice = { index: 0, message, finish_reason: finish, logprobs: null };
      sendJson(res, 200, { ...base, object: "chat.completion", choices: [choice], usage });
      return;
    }
    const chunk = (delta: unknown, finishReason: string | null = null) =>
      `data: ${JSON.stringify({ ...base, object: "chat.completion.chunk", choices: [{ index: 0, delta, finish_reason: finishReason }] })}\n\n`;
    let out = chunk({ role: "assistant", content: "" }) + (r.inject ?? "");
    for (const t of words(r.reasoning ?? "")) out += chunk({ reasoning_content: t });
    for (const t of words(r.text ?? "")) out += chunk({ content: t });
    calls.forEach((c, i) => {
      out += chunk({
        tool_calls: [{ index: i, id: c.id, type: "function", function: { name: c.name, arguments: "" } }],
      });
      for (const p of pieces(c.arguments))
        out += chunk({ tool_calls: [{ index: i, function: { arguments: p } }] });
    });
    out += chunk({}, finish);
    if (body.stream_options?.include_usage) {
      out += `data: ${JSON.stringify({ ...base, object: "chat.completion.chunk", choices: [], usage })}\n\n`;
    }
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    res.end(`${out}data: [DONE]\n\n`);
  };

  const answer = (res: ServerResponse, request: FakeRequest, index: number, r: FakeResponse) => {
    if ("raw" in r) {
      const type = r.raw.trimStart().startsWith("{") ? "application/json" : "text/event-stream";
      res.writeHead(r.status ?? 200, { "content-type": type, ...r.headers });
      res.end(r.raw);
    } else if ("status" in r) {
      const body = r.body ?? JSON.stringify(errorBody(`Fake server error (HTTP ${r.status})`));
      res.writeHead(r.status, { "content-type": "application/json", ...r.headers });
      res.end(body);
    } else if ("reset" in r) {
      res.socket?.destroy();
    } else if ("breakOff" in r || "stall" in r || "cutMidChunk" in r) {
      const base = {
        id: `chatcmpl-fake-${index}`,
        object: "chat.completion.chunk",
        created,
        model: "fake-model",
      };
      const chunk = (delta: unknown) =>
        `data: ${JSON.stringify({ ...base, choices: [{ index: 0, delta, finish_reason: null }] })}\n\n`;
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write(chunk({ role: "assistant", content: "" }));
      for (const t of words(r.afterText ?? "")) res.write(chunk({ content: t }));
      if ("cutMidChunk" in r) {
        const line = chunk({ content: " and the rest" });
        res.write(line.slice(0, Math.floor(line.length / 2)));
      }
      // Destroy only after the chunks were flushed, so the client sees them before the break.
      if (!("stall" in r)) setTimeout(() => res.socket?.destroy(), 20);
    } else reply(res, request, index, r);
  };

  const server = createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on("data", (d: Buffer) => parts.push(d));
    req.on("end", async () => {
      const url = new URL(req.url ?? "/", "http://fake");
      const path = url.pathname;
      if (req.method === "GET" && path === "/v1/models") {
        sendJson(res, 200, {
          object: "list",
          data: [{ id: "fake-model", object: "model", owned_by: "fake" }],
        });
        return;
      }
      const chat =
        path === "/v1/chat/completions" || /^\/openai\/deployments\/[^/]+\/chat\/completions$/.test(path);
      if (req.method !== "POST" || !chat) {
        sendJson(res, 404, errorBody(`Fake OpenAI server: no route ${req.method} ${path}`, "not_found"));
        return;
      }
      const text = Buffer.concat(parts).toString("utf8");
      let body: unknown;
      try {
        body = text ? JSON.parse(text) : undefined;
      } catch {
        body = text;
      }
      const query = Object.fromEntries(url.searchParams);
      const request: FakeRequest = { method: req.method, path, query, headers: req.headers, body };
      const index = requests.push(request) - 1;
      const noRetry = { "x-should-retry": "false" };
      try {
        const r = typeof respond === "function" ? await respond(request, index) : respond[index];
        if (r === undefined) {
          const count = typeof respond === "function" ? 0 : respond.length;
          const message = `Fake OpenAI server: no scripted response for request #${index + 1} (only ${count} given)`;
          sendJson(res, 500, errorBody(message), noRetry);
          return;
        }
        answer(res, request, index, r);
      } catch (error) {
        const message = `Fake OpenAI server: respond() threw: ${error instanceof Error ? error.message : String(error)}`;
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
    url: `http://127.0.0.1:${port}/v1`,
    origin: `http://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
