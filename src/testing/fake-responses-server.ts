import type { ServerResponse } from "node:http";
import type { Usage } from "../core/messages.js";
import type { FakeFault, FakeProtocol, FakeRequest, FakeResponderOf } from "./fake-http.js";
import { pieces, sendJson, startFakeHttpServer, tokens, words } from "./fake-http.js";
import type { FakeToolCall } from "./fake-openai-server.js";

/**
 * A fake OpenAI Responses API server on 127.0.0.1 (random port) for tests, the sibling of
 * `startFakeOpenAIServer`. `POST /v1/responses` answers with what `respond` returns. Scripted
 * replies stream the real event sequence (each event as `event: <type>` and `data: <json>`, with
 * its `sequence_number`): `response.created`, `response.in_progress`; a reasoning item (summary
 * part added, word-sized `reasoning_summary_text` deltas, done, with its `encrypted_content` when
 * the request asked for `reasoning.encrypted_content`); a message item (content part added,
 * word-sized `output_text` deltas, or `refusal` deltas, done); each function call item (added
 * with empty arguments, the arguments in several `function_call_arguments` deltas, done); then
 * `response.completed` (or `response.incomplete` / `response.failed`) with the whole response and
 * its usage. Without `stream: true` in the request the answer is that response object as JSON.
 */
export interface FakeResponsesReply {
  text?: string;
  /** Streamed as a reasoning summary, before everything else. */
  reasoning?: string;
  /**
   * The reasoning item's `encrypted_content`; default `enc_<request index>` when there is
   * `reasoning` and the request's `include` asks for `reasoning.encrypted_content`, else none.
   */
  encryptedReasoning?: string;
  /** Function calls (default `call_id` `call_<request index>_<call index>`), after the text. */
  toolCalls?: FakeToolCall[];
  /** A refusal part instead of the text. */
  refusal?: string;
  /** Default: about 4 characters a token of the request and of the reply; cached and reasoning 0. */
  usage?: Partial<Usage>;
  /**
   * How the response ends; default "completed". "incomplete" ends with `response.incomplete` (`incompleteReason`, default
   * `max_output_tokens`), the last call's arguments cut in half; "failed" ends with
   * `response.failed` carrying `error` (default `server_error`) right after what was streamed.
   */
  end?: "completed" | "incomplete" | "failed";
  incompleteReason?: string;
  error?: { code: string; message: string };
  /** Streaming only: text written verbatim after `response.in_progress`, e.g. a malformed SSE line. */
  inject?: string;
  /**
   * Streaming only: stream as llama.cpp's server does: no `output_index` on any event (items are
   * named by `item_id` alone), function call items without an `id` (their events name the
   * `call_id`), and every `.done` event after the last item's deltas.
   */
  llamaCppEvents?: boolean;
}

/**
 * Any response: a scripted reply or one of the faults (see `FakeFault`; an HTTP error's default
 * body is OpenAI's `{"error":{...}}`, the partial streams start with `response.created` and a
 * message item).
 */
export type FakeResponsesResponse = FakeResponsesReply | FakeFault;

export type FakeResponsesResponder = FakeResponderOf<FakeResponsesResponse>;

export interface FakeResponsesServer {
  /** Base URL ending in `/v1`, e.g. `http://127.0.0.1:54321/v1`. */
  readonly url: string;
  readonly origin: string;
  /** Every `/v1/responses` request received, in order. */
  readonly requests: FakeRequest[];
  close(): Promise<void>;
}

type Json = Record<string, unknown>;

function errorBody(message: string, type = "server_error") {
  return { error: { message, type, param: null, code: null } };
}

/** The events of one scripted reply, in order, and the response object they end with. */
function script(request: FakeRequest, index: number, r: FakeResponsesReply, created: number) {
  const body = request.body ?? {};
  const events: Json[] = [];
  const emit = (type: string, fields: Json) => events.push({ type, ...fields });
  const output: Json[] = [];
  const id = `resp_fake_${index}`;
  const response = (status: string, extra: Json = {}): Json => ({
    id,
    object: "response",
    created_at: created,
    status,
    error: null,
    incomplete_details: null,
    instructions: body.instructions ?? null,
    model: String(body.model ?? "fake-model"),
    output: status === "in_progress" ? [] : output,
    parallel_tool_calls: body.parallel_tool_calls ?? true,
    store: body.store ?? true,
    tool_choice: "auto",
    tools: body.tools ?? [],
    usage: null,
    ...extra,
  });
  emit("response.created", { response: response("in_progress") });
  emit("response.in_progress", { response: response("in_progress") });

  const item = (added: Json, stream: (at: number) => void, done: Json) => {
    const at = output.length;
    emit("response.output_item.added", { output_index: at, item: added });
    stream(at);
    output.push(done);
    emit("response.output_item.done", { output_index: at, item: done });
  };
  const include = Array.isArray(body.include) && body.include.includes("reasoning.encrypted_content");
  if (r.reasoning) {
    const itemId = `rs_fake_${index}`;
    const encrypted = r.encryptedReasoning ?? (include ? `enc_${index}` : undefined);
    const summary = [{ type: "summary_text", text: r.reasoning }];
    const base = {
      id: itemId,
      type: "reasoning",
      ...(encrypted !== undefined && { encrypted_content: encrypted }),
    };
    item(
      { ...base, summary: [] },
      (at) => {
        const where = { item_id: itemId, output_index: at, summary_index: 0 };
        emit("response.reasoning_summary_part.added", { ...where, part: { type: "summary_text", text: "" } });
        for (const w of words(r.reasoning ?? ""))
          emit("response.reasoning_summary_text.delta", { ...where, delta: w });
        emit("response.reasoning_summary_text.done", { ...where, text: r.reasoning });
        emit("response.reasoning_summary_part.done", { ...where, part: summary[0] });
      },
      { ...base, summary },
    );
  }
  const text = r.refusal ?? r.text;
  if (text) {
    const itemId = `msg_fake_${index}`;
    const kind = r.refusal === undefined ? "output_text" : "refusal";
    const part =
      kind === "output_text" ? { type: kind, text, annotations: [] } : { type: kind, refusal: text };
    const base = { id: itemId, type: "message", role: "assistant" };
    item(
      { ...base, status: "in_progress", content: [] },
      (at) => {
        const where = { item_id: itemId, output_index: at, content_index: 0 };
        const empty = kind === "output_text" ? { ...part, text: "" } : { ...part, refusal: "" };
        emit("response.content_part.added", { ...where, part: empty });
        const delta = kind === "output_text" ? "response.output_text.delta" : "response.refusal.delta";
        for (const w of words(text))
          emit(delta, { ...where, delta: w, ...(kind === "output_text" && { logprobs: [] }) });
        if (kind === "output_text") emit("response.output_text.done", { ...where, text, logprobs: [] });
        else emit("response.refusal.done", { ...where, refusal: text });
        emit("response.content_part.done", { ...where, part });
      },
      { ...base, status: "completed", content: [part] },
    );
  }
  const calls = r.toolCalls ?? [];
  calls.forEach((c, i) => {
    const itemId = `fc_fake_${index}_${i}`;
    const full = typeof c.arguments === "string" ? c.arguments : JSON.stringify(c.arguments);
    const cut = r.end === "incomplete" && i === calls.length - 1;
    const args = cut ? full.slice(0, Math.floor(full.length / 2)) : full;
    const base = { id: itemId, type: "function_call", call_id: c.id ?? `call_${index}_${i}`, name: c.name };
    const added = { ...base, status: "in_progress", arguments: "" };
    const at = output.length;
    emit("response.output_item.added", { output_index: at, item: added });
    for (const p of pieces(args, 8)) {
      emit("response.function_call_arguments.delta", { item_id: itemId, output_index: at, delta: p });
    }
    if (cut) {
      output.push({ ...added, arguments: args });
      return;
    }
    emit("response.function_call_arguments.done", { item_id: itemId, output_index: at, arguments: args });
    const done = { ...base, status: "completed", arguments: args };
    output.push(done);
    emit("response.output_item.done", { output_index: at, item: done });
  });

  const u = r.usage ?? {};
  const outText =
    (r.text ?? "") +
    (r.reasoning ?? "") +
    (r.refusal ?? "") +
    calls.map((c) => c.name + JSON.stringify(c.arguments)).join("");
  const input = u.inputTokens ?? tokens(JSON.stringify(body.input ?? "") + String(body.instructions ?? ""));
  const outputTokens = u.outputTokens ?? tokens(outText);
  const usage = {
    input_tokens: input,
    input_tokens_details: { cached_tokens: u.cachedInputTokens ?? 0 },
    output_tokens: outputTokens,
    output_tokens_details: { reasoning_tokens: u.reasoningTokens ?? 0 },
    total_tokens: input + outputTokens,
  };
  const status = r.end ?? "completed";
  const final =
    status === "failed"
      ? response("failed", {
          error: r.error ?? { code: "server_error", message: "The server had an error." },
        })
      : status === "incomplete"
        ? response("incomplete", {
            incomplete_details: { reason: r.incompleteReason ?? "max_output_tokens" },
            usage,
          })
        : response("completed", { usage });
  emit(`response.${status}`, { response: final });
  return { events: r.llamaCppEvents ? llamaCpp(events) : events, final };
}

/** The events as llama.cpp's server orders and names them (see `FakeResponsesReply.llamaCppEvents`). */
function llamaCpp(events: Json[]): Json[] {
  const callIds = new Map<string, string>();
  const renamed = events.map((e) => {
    const { output_index: _index, ...rest } = e;
    const item = rest.item as Json | undefined;
    if (item?.type === "function_call") {
      const { id, ...call } = item;
      callIds.set(String(id), String(call.call_id));
      return { ...rest, item: call };
    }
    return rest;
  });
  const named = renamed.map((e) =>
    typeof e.item_id === "string" && callIds.has(e.item_id) ? { ...e, item_id: callIds.get(e.item_id) } : e,
  );
  const last = named.at(-1) as Json;
  const body = named.slice(0, -1);
  const isDone = (e: Json) => String(e.type).endsWith(".done");
  return [...body.filter((e) => !isDone(e)), ...body.filter(isDone), last];
}

export async function startFakeResponsesServer(options: {
  respond: FakeResponsesResponder;
}): Promise<FakeResponsesServer> {
  let created = Math.floor(Date.now() / 1000);
  const sse = (events: Json[], from = 0) =>
    events
      .map((e, i) => `event: ${e.type}\ndata: ${JSON.stringify({ ...e, sequence_number: from + i })}\n\n`)
      .join("");

  const reply = (res: ServerResponse, request: FakeRequest, index: number, r: FakeResponsesReply) => {
    const { events, final } = script(request, index, r, created++);
    if (request.body?.stream !== true) {
      sendJson(res, 200, final);
      return;
    }
    const [first, second, ...rest] = events;
    const head = sse([first, second].filter((e): e is Json => e !== undefined));
    res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache" });
    res.end(head + (r.inject ?? "") + sse(rest, 2));
  };

  const partialItem = (index: number) => ({
    item_id: `msg_fake_${index}`,
    output_index: 0,
    content_index: 0,
  });
  const protocol: FakeProtocol<FakeResponsesReply> = {
    name: "Fake Responses server",
    route: (method, path, res) => {
      if (method === "POST" && path === "/v1/responses") return true;
      sendJson(res, 404, errorBody(`Fake Responses server: no route ${method} ${path}`, "not_found"));
      return false;
    },
    errorBody: (message) => errorBody(message),
    partialStart: (_request, index) => {
      const response = { id: `resp_fake_${index}`, object: "response", status: "in_progress", output: [] };
      return sse([
        { type: "response.created", response },
        { type: "response.in_progress", response },
        {
          type: "response.output_item.added",
          output_index: 0,
          item: {
            id: `msg_fake_${index}`,
            type: "message",
            role: "assistant",
            status: "in_progress",
            content: [],
          },
        },
        {
          type: "response.content_part.added",
          ...partialItem(index),
          part: { type: "output_text", text: "", annotations: [] },
        },
      ]);
    },
    partialText: (text, index) =>
      sse([{ type: "response.output_text.delta", ...partialItem(index), delta: text, logprobs: [] }], 4),
    reply,
  };

  const server = await startFakeHttpServer(options.respond, protocol);
  return { ...server, url: `${server.origin}/v1` };
}
