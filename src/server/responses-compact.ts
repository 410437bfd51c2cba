import { randomUUID } from "node:crypto";
import type { Context } from "hono";
import { z } from "zod";
import type { Message, Usage } from "../core/messages.js";
import { errorResponse } from "./errors.js";
import type { ServerEnv } from "./request-log.js";
import { responsesUsage } from "./responses-map.js";
import { type EndpointDeps, readRequest, servingAgent } from "./run-request.js";

// `POST /v1/responses/compact` (the Responses API's compaction): a conversation in, the same
// conversation shorter out: its user messages as they were and one `compaction` item standing for
// the rest, which a later `POST /v1/responses` takes back in its `input`.

const compactSchema = z
  .object({
    model: z.string().optional(),
    input: z.union([z.string(), z.array(z.record(z.string(), z.unknown()))]).nullish(),
    instructions: z.string().nullish(),
    previous_response_id: z.string().min(1).nullish(),
  })
  .loose();

/** What marks a compaction item's content as this server's: the summary follows, base64 encoded. */
const MARK = "agentloop.compaction.v1:";

/** The summary a compaction item of this server carries; undefined for another's (encrypted by its provider). */
export function compactionSummary(item: Record<string, unknown>): string | undefined {
  const content = item.encrypted_content;
  if (typeof content !== "string") return undefined;
  const text = Buffer.from(content, "base64").toString("utf8");
  return text.startsWith(MARK) ? text.slice(MARK.length) : undefined;
}

/** A compaction item's message in the history: the summary of what it replaced, as the user's. */
export function compactionMessage(summary: string): Message {
  return { role: "user", content: `[Summary of the earlier conversation: ${summary}]` };
}

const SYSTEM =
  "You compress a conversation so it can continue without it. Keep facts learned, decisions, tool " +
  "results that still matter, errors to avoid and what remains to do. Reply with the summary only.";

type Item = Record<string, unknown>;

/** The text of an input item for the summarizer: `role: text`, a call with its arguments, a result. */
function lineOf(item: Item): string {
  const type = typeof item.type === "string" ? item.type : "message";
  if (type === "function_call") return `assistant called ${String(item.name)}(${String(item.arguments)})`;
  if (type === "function_call_output") return `tool result: ${textOf(item.output)}`;
  if (type === "compaction") return `earlier summary: ${compactionSummary(item) ?? "(not readable here)"}`;
  if (type !== "message") return "";
  return `${String(item.role)}: ${textOf(item.content)}`;
}

function textOf(value: unknown): string {
  if (typeof value === "string") return value;
  if (!Array.isArray(value)) return JSON.stringify(value ?? "");
  return value.map((p) => (typeof p?.text === "string" ? p.text : `[${String(p?.type)}]`)).join("");
}

/**
 * Compacts a conversation (`input`, after the stored conversation of `previous_response_id` when
 * given) with one call of the served agent's model: the answer is a `response.compaction` object
 * whose `output` holds the user messages as they were, then one `compaction` item with the summary
 * of everything. Checks: JSON and schema (400), the model (404), a conversation to compact (400),
 * `previous_response_id` (501 without a store, 404); a model call that fails is a 502.
 */
export async function compactResponse(c: Context<ServerEnv>, deps: EndpointDeps): Promise<Response> {
  const request = await readRequest(c, compactSchema);
  if (request instanceof Response) return request;
  const served = servingAgent(deps, request.model, undefined, "text.format", []);
  if (served instanceof Response) return served;
  const items: Item[] = [];
  const previous = request.previous_response_id ?? undefined;
  if (previous !== undefined) {
    const stored = await storedItems(deps, previous);
    if (stored instanceof Response) return stored;
    items.push(...stored);
  }
  const { input } = request;
  if (typeof input === "string") items.push({ type: "message", role: "user", content: input });
  else if (input) items.push(...input);
  if (items.length === 0) {
    const message = "Nothing to compact: send the conversation as input, or previous_response_id.";
    return errorResponse(400, message, "invalid_request", { param: "input" });
  }
  const transcript = items.map(lineOf).filter(Boolean).join("\n");
  const system = request.instructions ? `${SYSTEM}\n\n${request.instructions}` : SYSTEM;
  let summary = "";
  let usage: Usage = { inputTokens: 0, outputTokens: 0 };
  let failure: string | undefined;
  const messages: Message[] = [{ role: "user", content: transcript }];
  for await (const event of served.agent.options.model.stream(
    { system, messages, tools: [] },
    { signal: c.req.raw.signal },
  )) {
    if (event.type === "done") {
      summary = event.message.content.trim();
      usage = event.message.usage;
    } else if (event.type === "error") failure = event.error.message;
  }
  if (failure !== undefined || summary === "") {
    const message = `The model could not compact the conversation: ${deps.redact(failure ?? "it answered nothing")}`;
    return errorResponse(502, message, "model_error");
  }
  const users = items.filter((item) => (item.type ?? "message") === "message" && item.role === "user");
  const encrypted = Buffer.from(MARK + summary, "utf8").toString("base64");
  return c.json({
    id: `resp_${randomUUID().replaceAll("-", "")}`,
    object: "response.compaction",
    created_at: Math.floor(Date.now() / 1000),
    output: [
      ...users.map((item) => ({
        type: "message",
        role: "user",
        content:
          typeof item.content === "string" ? [{ type: "input_text", text: item.content }] : item.content,
      })),
      { id: `cmp_${randomUUID().replaceAll("-", "")}`, type: "compaction", encrypted_content: encrypted },
    ],
    usage: responsesUsage(usage),
  });
}

/** The stored conversation of a response, as input items (its text), or the error response. */
async function storedItems(deps: EndpointDeps, responseId: string): Promise<Item[] | Response> {
  const { store } = deps;
  if (!store) {
    const message =
      "previous_response_id needs stored runs, and this server has no store: send the conversation as input.";
    return errorResponse(501, message, "no_store", { param: "previous_response_id" });
  }
  const sessionId = await store.sessionOfRun(responseId);
  const stored = sessionId === undefined ? undefined : await store.read(sessionId);
  if (!stored) {
    const message = `Previous response with id '${responseId.slice(0, 100)}' not found.`;
    return errorResponse(404, message, "previous_response_not_found", { param: "previous_response_id" });
  }
  return stored.messages.map((m): Item => {
    if (m.role === "tool") return { type: "function_call_output", output: m.content };
    const calls =
      m.role === "assistant" && m.toolCalls?.length
        ? ` (called ${m.toolCalls.map((t) => t.name).join(", ")})`
        : "";
    return { type: "message", role: m.role, content: m.content + calls };
  });
}
