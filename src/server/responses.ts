import { randomUUID } from "node:crypto";
import type { Context } from "hono";
import type { RunHandle } from "../agent/handle.js";
import { historyOfLog } from "../agent/state.js";
import type { Message } from "../core/messages.js";
import { echoed } from "../core/redact.js";
import type { SessionStore } from "../store/types.js";
import { continueWithResults } from "./client-results.js";
import { type ClientToolRequest, clientToolsOf, resultsFor, type SentResult } from "./client-tools.js";
import { errorResponse } from "./errors.js";
import type { ServerEnv } from "./request-log.js";
import { answerRun } from "./respond.js";
import {
  echoedFields,
  type ResponsesRequest,
  responsesRequestSchema,
  toResponsesRunInput,
} from "./responses-input.js";
import { ResponsesMapper } from "./responses-map.js";
import {
  type EndpointDeps,
  namedSession,
  readRequest,
  runInputOf,
  servingAgent,
  startRun,
} from "./run-request.js";
import { conflict, noStore } from "./sessions.js";

const PREVIOUS = "previous_response_id";

/**
 * The conversation up to a stored response (any stored run: a chat completion's id works too),
 * or the error response saying why it cannot be continued: 404 when no such run is stored, 409
 * when it is not the last run of its session or has not finished.
 */
async function conversationOf(store: SessionStore, responseId: string): Promise<Message[] | Response> {
  const sessionId = await store.sessionOfRun(responseId);
  const stored = sessionId === undefined ? undefined : await store.read(sessionId);
  if (!stored) {
    const message = `Previous response with id '${echoed(responseId)}' not found: it must be the id of a response this server stored.`;
    return errorResponse(404, message, "previous_response_not_found", { param: PREVIOUS });
  }
  const last = stored.lastRun;
  if (last?.runId !== responseId) {
    return conflict(
      `Response '${responseId}' is not the latest of its conversation: continue from '${last?.runId}' (${PREVIOUS}).`,
      "not_latest_response",
    );
  }
  if (last.status === "running") {
    return conflict(
      `Response '${responseId}' has not finished: wait for it, or continue it with POST /v1/runs/${responseId}/resume if its server died.`,
      "run_interrupted",
    );
  }
  return historyOfLog(stored.messages);
}

/**
 * `POST /v1/responses` (SPEC section 6): the agent as an OpenAI Responses API model, after
 * auth, the JSON content type, the body limit and the draining check. The answer is a `response`
 * object, or with `stream: true` Server-Sent Events of `response.*` events (see
 * `ResponsesMapper`). Order of checks: JSON (400), schema and input (400), session header (400,
 * 501 without a store), `previous_response_id` (501 without a store, 404, 409), `text.format` (400),
 * the model (404), a json_schema for an agent with its own output schema (400), the session (409),
 * an image over the agent's own limit (413).
 * A `text.format` json_schema (or json_object) is the run's output schema: the answer is its JSON.
 *
 * With a store (and unless the request says `store: false` and sends no tools), the run is stored under its id (the
 * response's `id`) in a session of its own, so a later request continues it by
 * `previous_response_id`: its conversation is the history, the request's input comes after it.
 * `X-Agentloop-Session` names a session to continue instead, as for chat completions.
 *
 * The client's function `tools` are offered beside the agent's own (SPEC section 14): a run whose
 * model calls one ends its response with `function_call` items and waits; an input ending with
 * their `function_call_output` items continues it (`toolOutputs`).
 */
export async function createResponse(c: Context<ServerEnv>, deps: EndpointDeps): Promise<Response> {
  const request = await readRequest(c, responsesRequestSchema);
  if (request instanceof Response) return request;
  const items = request.input;
  if (typeof items !== "string" && items.at(-1)?.type === "function_call_output")
    return toolOutputs(c, deps, request, items);
  const input = runInputOf(toResponsesRunInput(request));
  if (input instanceof Response) return input;
  const named = namedSession(c);
  if (named instanceof Response) return named;
  const previous = request.previous_response_id ?? undefined;
  if (named !== undefined && previous !== undefined) {
    const message = `Send either ${PREVIOUS} or the X-Agentloop-Session header, not both: each names the conversation to continue.`;
    return errorResponse(400, message, "invalid_request", { param: PREVIOUS });
  }
  const { store } = deps;
  if (!store && named !== undefined) return noStore("X-Agentloop-Session");
  if (!store && previous !== undefined) return noStore(PREVIOUS);
  let history: readonly Message[] = input.history;
  if (store && previous !== undefined) {
    const before = await conversationOf(store, previous);
    if (before instanceof Response) return before;
    history = [...before, ...input.history];
  }
  const served = servingAgent(deps, request.model, request.text?.format, "text.format", ["schema"]);
  if (served instanceof Response) return served;
  const { model, agent, outputSchema } = served;
  const client = runInputOf(clientToolsOf(request, agent));
  if (client instanceof Response) return client;

  const id = `resp_${randomUUID().replaceAll("-", "")}`;
  // A run that may wait on the client's tools is stored whatever `store` says: their results continue it.
  const waits = (client?.tools.length ?? 0) > 0;
  const kept = store !== undefined && (request.store !== false || named !== undefined || waits);
  const started = await startRun(c, deps, {
    agent,
    id,
    input,
    history,
    store: kept ? store : undefined,
    named,
    outputSchema,
    client,
  });
  if (started instanceof Response) return started;
  const wire = mapperFor(request, id, model, started.handle, started.stored === true, client);
  return answerRun(c, deps, {
    ...started,
    id,
    model,
    stream: request.stream === true,
    includeUsage: false,
    wire,
  });
}

/** The Responses wire of a run answering `request`. */
function mapperFor(
  request: ResponsesRequest,
  id: string,
  model: string,
  handle: RunHandle,
  stored: boolean,
  client: ClientToolRequest | undefined,
): ResponsesMapper {
  return new ResponsesMapper({
    id,
    model,
    createdAt: Math.floor(Date.now() / 1000),
    instructions: request.instructions ?? null,
    previousResponseId: request.previous_response_id ?? null,
    store: stored,
    ...(request.text?.format != null && { text: { format: request.text.format } }),
    typed: handle.state.outputSchema !== undefined,
    clientTools: new Set((handle.state.clientTools ?? []).map((tool) => tool.name)),
    echo: {
      ...echoedFields(request),
      tools: (handle.state.clientTools ?? []).map((tool) => ({ type: "function", ...tool, strict: false })),
      tool_choice: client?.choiceEchoed ?? "auto",
      parallel_tool_calls: client?.parallelToolCalls ?? true,
    },
  });
}

/**
 * A request whose input ends with `function_call_output` items: the results of the client's calls,
 * which continue the run that waits on them (`previous_response_id`, or the run their call ids
 * name). Its answer is that run's response (same `id`).
 */
async function toolOutputs(
  c: Context<ServerEnv>,
  deps: EndpointDeps,
  request: ResponsesRequest,
  items: readonly Record<string, unknown>[],
): Promise<Response> {
  const sent: SentResult[] = [];
  for (let i = items.length - 1; i >= 0 && items[i]?.type === "function_call_output"; i--) {
    const { call_id: id, output } = items[i] as { call_id?: unknown; output?: unknown };
    const param = `input.${i}`;
    if (typeof id !== "string")
      return errorResponse(
        400,
        `${param}.call_id: a function_call_output needs the call_id of its call.`,
        "invalid_request",
        { param },
      );
    const content = typeof output === "string" ? output : JSON.stringify(output ?? "");
    sent.unshift({ id, content, param });
  }
  const found = runInputOf(resultsFor(sent, request.previous_response_id ?? undefined));
  if (found instanceof Response) return found;
  const served = servingAgent(deps, request.model, undefined, "text.format", []);
  if (served instanceof Response) return served;
  const client = runInputOf(clientToolsOf(request, served.agent));
  if (client instanceof Response) return client;
  return continueWithResults(c, deps, {
    ...found,
    param: "input",
    model: request.model,
    client,
    stream: request.stream === true,
    includeUsage: false,
    wire: (handle, model) => mapperFor(request, found.runId, model, handle, true, client),
  });
}
