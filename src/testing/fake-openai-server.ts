import type { ServerResponse } from "node:http";
import type { Usage } from "../core/messages.js";
import type { FakeFault, FakeProtocol, FakeRequest, FakeResponderOf } from "./fake-http.js";
import { pieces, sendJson, startFakeHttpServer, tokens, words } from "./fake-http.js";

export type { FakeRequest } from "./fake-http.js";

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

/**
 * Any response: a scripted reply or one of the faults (see `FakeFault`; an HTTP error's default
 * body is an OpenAI-style `{"error":{...}}`, the partial streams start with a role chunk).
 */
export type FakeResponse = FakeReply | FakeFault;

export type FakeResponder = FakeResponderOf<FakeResponse>;

export interface FakeOpenAIServer {
  /** Base URL ending in `/v1`, e.g. `http://127.0.0.1:54321/v1`. */
  readonly url: string;
  /** The server's root, e.g. `http://127.0.0.1:54321` (an Azure-style base URL). */
  readonly origin: string;
  /** Every chat-completions request received, in order. */
  readonly requests: FakeRequest[];
  close(): Promise<void>;
}

function errorBody(message: string, type = "server_error") {
  return { error: { message, type, param: null, code: null } };
}

export async function startFakeOpenAIServer(options: { respond: FakeResponder }): Promise<FakeOpenAIServer> {
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
      for (const p of pieces(c.arguments, 8))
        out += chunk({ tool_calls: [{ index: i, function: { arguments: p } }] });
    });
    out += chunk({}, finish);
    if (body.stream_options?.include_usage) {
      out += `data: ${JSON.stringify({ ...base, object: "chat.completion.chunk", choices: [], usage })}\n\n`;
    }
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    res.end(`${out}data: [DONE]\n\n`);
  };

  const partialChunk = (index: number, delta: unknown) => {
    const base = {
      id: `chatcmpl-fake-${index}`,
      object: "chat.completion.chunk",
      created,
      model: "fake-model",
    };
    return `data: ${JSON.stringify({ ...base, choices: [{ index: 0, delta, finish_reason: null }] })}\n\n`;
  };

  const protocol: FakeProtocol<FakeReply> = {
    name: "Fake OpenAI server",
    route: (method, path, res) => {
      if (method === "GET" && path === "/v1/models") {
        sendJson(res, 200, {
          object: "list",
          data: [{ id: "fake-model", object: "model", owned_by: "fake" }],
        });
        return false;
      }
      const chat =
        path === "/v1/chat/completions" || /^\/openai\/deployments\/[^/]+\/chat\/completions$/.test(path);
      if (method === "POST" && chat) return true;
      sendJson(res, 404, errorBody(`Fake OpenAI server: no route ${method} ${path}`, "not_found"));
      return false;
    },
    errorBody: (message) => errorBody(message),
    partialStart: (_request, index) => partialChunk(index, { role: "assistant", content: "" }),
    partialText: (text, index) => partialChunk(index, { content: text }),
    reply,
  };

  const server = await startFakeHttpServer(options.respond, protocol);
  return { ...server, url: `${server.origin}/v1` };
}
