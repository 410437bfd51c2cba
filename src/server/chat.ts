import { randomUUID } from "node:crypto";
import type { Context } from "hono";
import type { AnyAgent } from "../agent/agent.js";
import type { RunHandle } from "../agent/handle.js";
import type { Session } from "../agent/session.js";
import { AgentloopError } from "../core/errors.js";
import type { Message } from "../core/messages.js";
import { echoed } from "../core/redact.js";
import { SESSION_ID_PATTERN, type SessionStore } from "../store/types.js";
import { errorResponse } from "./errors.js";
import { chatRequestSchema, describeRequestIssue, toRunInput } from "./openai-compat.js";
import { requestedFormat, runOutputSchema } from "./output-format.js";
import type { ServerEnv } from "./request-log.js";
import { type AnswerDeps, answerRun } from "./respond.js";
import { conflict, noStore, releaser, SESSION_HEADER, storedRun, takeSession } from "./sessions.js";

/** What the chat completions endpoint needs from the app. */
export interface ChatDeps extends AnswerDeps {
  agents: Readonly<Record<string, AnyAgent>>;
  /** The model id of a request without `model`. */
  defaultModel: string;
  /** Where runs are stored; without it nothing is. */
  store: SessionStore | undefined;
}

/** The agent a request names (`model`, or the default), or the 404 naming the model. */
export function agentFor(deps: ChatDeps, requested: string | undefined): [string, AnyAgent] | Response {
  const model = requested ?? deps.defaultModel;
  // Own properties only: `constructor` or `__proto__` is an unknown model, not Object's.
  const agent = Object.hasOwn(deps.agents, model) ? deps.agents[model] : undefined;
  if (agent) return [model, agent];
  const message = `The model '${echoed(model)}' does not exist: GET /v1/models lists the served agents.`;
  return errorResponse(404, message, "model_not_found", { param: "model" });
}

/**
 * `POST /v1/chat/completions` (SPEC section 6), after auth, the JSON content type, the body
 * limit and the draining check. Order of checks: JSON (400), schema, conversation, session id and
 * `response_format` (400), the model (404), a json_schema for an agent with its own output schema
 * (400), then the session (409). A `response_format` json_schema (or json_object) is the run's
 * output schema: the answer is its JSON. The run is aborted when the client disconnects,
 * streaming or not.
 *
 * With a store, the run is stored under its id (the completion's `id`), in a session of its own,
 * or in the one named by `X-Agentloop-Session`: then the session's stored conversation is the
 * history, and of the request's messages only the system ones (extra instructions for this run)
 * and the last user message (the new input) count; the others are ignored, except on a session
 * with no messages yet, which they start.
 */
export async function chatCompletions(c: Context<ServerEnv>, deps: ChatDeps): Promise<Response> {
  let raw: unknown;
  try {
    raw = await c.req.json();
  } catch {
    return errorResponse(400, "The request body is not valid JSON.", "invalid_json");
  }
  const parsed = chatRequestSchema.safeParse(raw);
  if (!parsed.success) {
    const { message, param } = describeRequestIssue(parsed.error);
    return errorResponse(400, message, "invalid_request", { param });
  }
  const request = parsed.data;
  const input = toRunInput(request);
  if ("param" in input) {
    const code = input.status === 413 ? "image_too_large" : "invalid_request";
    return errorResponse(input.status ?? 400, input.message, code, { param: input.param });
  }
  const named = c.req.header(SESSION_HEADER);
  if (named !== undefined && !SESSION_ID_PATTERN.test(named)) {
    const message = `X-Agentloop-Session: invalid session id ${JSON.stringify(named.slice(0, 60))}: use 1 to 128 characters of A-Z a-z 0-9 . _ -.`;
    return errorResponse(400, message, "invalid_session_id", { param: SESSION_HEADER });
  }
  if (named !== undefined && !deps.store) return noStore("X-Agentloop-Session");
  const format = requestedFormat(request.response_format, "response_format", ["json_schema", "schema"]);
  if ("param" in format)
    return errorResponse(400, format.message, "invalid_request", { param: format.param });
  const found = agentFor(deps, request.model ?? undefined);
  if (found instanceof Response) return found;
  const [model, agent] = found;
  const outputSchema = runOutputSchema(agent, model, format, "response_format");
  if (outputSchema instanceof Response) return outputSchema;

  const id = `chatcmpl-${randomUUID()}`;
  let session: Session | undefined;
  let history: readonly Message[] = input.history;
  if (deps.store) {
    const taken = await takeSession(deps.store, named ?? id, deps.redact);
    if (taken instanceof Response) return taken;
    session = taken;
    const refused = named === undefined ? undefined : await refuseInterrupted(session);
    if (refused) return refused;
    if (session.messages.length > 0) history = session.messages;
  }

  const run = deps.runs.start(c.req.raw.signal);
  let handle: RunHandle;
  try {
    handle = agent.stream(input.input, {
      runId: id,
      signal: run.signal,
      history,
      ...(input.instructions !== "" && { instructions: input.instructions }),
      ...(session && { sessionId: session.id, checkpoint: storedRun(run, session) }),
      ...(outputSchema && { outputSchema }),
    });
  } catch (error) {
    run.end();
    await session?.release().catch(() => {});
    // The agent's own image limit may be lower than the one the request was checked against.
    if (
      error instanceof AgentloopError &&
      (error.code === "image_too_large" || error.code === "invalid_image")
    ) {
      return errorResponse(error.code === "image_too_large" ? 413 : 400, error.message, error.code);
    }
    throw error;
  }
  return answerRun(c, deps, {
    handle,
    run,
    id,
    model,
    stream: request.stream === true,
    includeUsage: request.stream_options?.include_usage === true,
    ...(session && { release: releaser(session), stored: true }),
  });
}

/** A named session whose last run was interrupted is resumed, not talked over: the 409 saying so (the session released). */
export async function refuseInterrupted(session: Session): Promise<Response | undefined> {
  const last = session.lastRun;
  if (last?.status !== "running") return undefined;
  await session.release().catch(() => {});
  return conflict(
    `Session '${session.id}' has an interrupted run (${last.runId}): continue it with POST /v1/runs/${last.runId}/resume before sending a new message.`,
    "run_interrupted",
  );
}
