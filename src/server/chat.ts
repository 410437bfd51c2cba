import { randomUUID } from "node:crypto";
import type { Context } from "hono";
import { continueWithResults } from "./client-results.js";
import { clientToolsOf, resultsFor, type SentResult } from "./client-tools.js";
import { type ChatRequest, chatRequestSchema, text, toRunInput } from "./openai-compat.js";
import type { ServerEnv } from "./request-log.js";
import { answerRun } from "./respond.js";
import {
  type EndpointDeps,
  namedSession,
  readRequest,
  runInputOf,
  servingAgent,
  startRun,
} from "./run-request.js";
import { noStore } from "./sessions.js";

/**
 * `POST /v1/chat/completions` (SPEC section 6), after auth, the JSON content type, the body
 * limit and the draining check. Order of checks: JSON (400), schema, conversation, session id and
 * `response_format` (400), the model (404), a json_schema for an agent with its own output schema
 * (400), the client's tools (400), the session (409), then an image over the agent's own limit
 * (413). A `response_format` json_schema (or json_object) is the run's output schema: the answer
 * is its JSON. The run is aborted when the client disconnects, streaming or not.
 *
 * With a store, the run is stored under its id (the completion's `id`), in a session of its own,
 * or in the one named by `X-Agentloop-Session`: then the session's stored conversation is the
 * history, and of the request's messages only the system ones (extra instructions for this run)
 * and the last user message (the new input) count; the others are ignored, except on a session
 * with no messages yet, which they start.
 *
 * The client's function `tools` are offered beside the agent's own (SPEC section 14): a run whose
 * model calls one answers with its `tool_calls` (`finish_reason` `tool_calls`) and waits; a
 * request whose last messages are the `tool` results of those calls continues it
 * (`continueWithResults`).
 */
export async function chatCompletions(c: Context<ServerEnv>, deps: EndpointDeps): Promise<Response> {
  const request = await readRequest(c, chatRequestSchema);
  if (request instanceof Response) return request;
  if (request.messages.at(-1)?.role === "tool") return toolResults(c, deps, request);
  const input = runInputOf(toRunInput(request));
  if (input instanceof Response) return input;
  const named = namedSession(c);
  if (named instanceof Response) return named;
  if (named !== undefined && !deps.store) return noStore("X-Agentloop-Session");
  const format = request.response_format;
  const served = servingAgent(deps, request.model, format, "response_format", ["json_schema", "schema"]);
  if (served instanceof Response) return served;
  const { model, agent, outputSchema } = served;
  const client = runInputOf(clientToolsOf(request, agent));
  if (client instanceof Response) return client;

  const id = `chatcmpl-${randomUUID()}`;
  const { store } = deps;
  const started = await startRun(c, deps, {
    agent,
    id,
    input,
    history: input.history,
    store,
    named,
    outputSchema,
    client,
  });
  if (started instanceof Response) return started;
  return answerRun(c, deps, {
    ...started,
    id,
    model,
    stream: request.stream === true,
    includeUsage: request.stream_options?.include_usage === true,
  });
}

/** A request ending with `tool` messages: the results of the client's calls, which continue their run. */
async function toolResults(
  c: Context<ServerEnv>,
  deps: EndpointDeps,
  request: ChatRequest,
): Promise<Response> {
  const sent: SentResult[] = [];
  for (let i = request.messages.length - 1; i >= 0; i--) {
    const m = request.messages[i];
    if (m?.role !== "tool") break;
    sent.unshift({ id: m.tool_call_id, content: text(m.content), param: `messages.${i}` });
  }
  const found = runInputOf(resultsFor(sent, undefined));
  if (found instanceof Response) return found;
  const served = servingAgent(deps, request.model, undefined, "response_format", []);
  if (served instanceof Response) return served;
  const client = runInputOf(clientToolsOf(request, served.agent));
  if (client instanceof Response) return client;
  return continueWithResults(c, deps, {
    ...found,
    param: "messages",
    model: request.model,
    client,
    stream: request.stream === true,
    includeUsage: request.stream_options?.include_usage === true,
  });
}
