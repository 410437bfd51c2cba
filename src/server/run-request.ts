import type { Context } from "hono";
import type { z } from "zod";
import type { AnyAgent } from "../agent/agent.js";
import type { Session } from "../agent/session.js";
import type { Message } from "../core/messages.js";
import { echoed } from "../core/redact.js";
import { SESSION_ID_PATTERN, type SessionStore } from "../store/types.js";
import type { JsonSchema } from "../tools/tool.js";
import type { ClientToolRequest } from "./client-tools.js";
import { errorResponse } from "./errors.js";
import { describeRequestIssue, type RequestProblem, type RunInput } from "./openai-compat.js";
import { requestedFormat, runOutputSchema } from "./output-format.js";
import type { ServerEnv } from "./request-log.js";
import type { AnswerDeps, RunAnswer } from "./respond.js";
import { conflict, releaser, SESSION_HEADER, storedRun, takeSession } from "./sessions.js";

// What the endpoints that start a run (`POST /v1/chat/completions`, `POST /v1/responses`) share:
// reading the request, the session it names, taking the session and starting the run.

/** What the endpoints need from the app. */
export interface EndpointDeps extends AnswerDeps {
  agents: Readonly<Record<string, AnyAgent>>;
  /** The model id of a request without `model`. */
  defaultModel: string;
  /** Where runs are stored; without it nothing is. */
  store: SessionStore | undefined;
}

/** The request's JSON body as `schema` reads it, or the 400 saying why not: not JSON, or the field at fault. */
export async function readRequest<S extends z.ZodType>(
  c: Context<ServerEnv>,
  schema: S,
): Promise<z.infer<S> | Response> {
  let raw: unknown;
  try {
    raw = await c.req.json();
  } catch {
    return errorResponse(400, "The request body is not valid JSON.", "invalid_json");
  }
  const parsed = schema.safeParse(raw);
  if (parsed.success) return parsed.data;
  const { message, param } = describeRequestIssue(parsed.error);
  return errorResponse(400, message, "invalid_request", { param });
}

/** The run a request asks for, or the 400 (413 for an image over the size limit) naming the part at fault. */
export function runInputOf<T = RunInput>(input: T | RequestProblem): T | Response {
  if (typeof input !== "object" || input === null || !("param" in input)) return input;
  const code = input.status === 413 ? "image_too_large" : "invalid_request";
  return errorResponse(input.status ?? 400, input.message, code, { param: input.param });
}

/** The session `X-Agentloop-Session` names (undefined without the header), or the 400 of an invalid id. */
export function namedSession(c: Context<ServerEnv>): string | undefined | Response {
  const named = c.req.header(SESSION_HEADER);
  if (named === undefined || SESSION_ID_PATTERN.test(named)) return named;
  const message = `X-Agentloop-Session: invalid session id ${JSON.stringify(named.slice(0, 60))}: use 1 to 128 characters of A-Z a-z 0-9 . _ -.`;
  return errorResponse(400, message, "invalid_session_id", { param: SESSION_HEADER });
}

/** The agent a request names (`model`, or the default), or the 404 naming the model. */
export function agentFor(deps: EndpointDeps, requested: string | undefined): [string, AnyAgent] | Response {
  const model = requested ?? deps.defaultModel;
  // Own properties only: `constructor` or `__proto__` is an unknown model, not Object's.
  const agent = Object.hasOwn(deps.agents, model) ? deps.agents[model] : undefined;
  if (agent) return [model, agent];
  const message = `The model '${echoed(model)}' does not exist: GET /v1/models lists the served agents.`;
  return errorResponse(404, message, "model_not_found", { param: "model" });
}

/**
 * What answers a request: the agent it names (`model`, or the default) and the run's output schema
 * from the structured output it asks for (`format`, at `param`; `schemaAt`: where a json_schema
 * keeps its schema). Or the error response: a format that cannot be read (400), an unknown model
 * (404), a json_schema for an agent with an output schema of its own (400).
 */
export function servingAgent(
  deps: EndpointDeps,
  requested: string | null | undefined,
  format: unknown,
  param: string,
  schemaAt: readonly string[],
): { model: string; agent: AnyAgent; outputSchema: JsonSchema | undefined } | Response {
  const wanted = requestedFormat(format, param, schemaAt);
  if ("param" in wanted)
    return errorResponse(400, wanted.message, "invalid_request", { param: wanted.param });
  const found = agentFor(deps, requested ?? undefined);
  if (found instanceof Response) return found;
  const [model, agent] = found;
  const outputSchema = runOutputSchema(agent, model, wanted, param);
  if (outputSchema instanceof Response) return outputSchema;
  return { model, agent, outputSchema };
}

/** A run to start, once its request passed the endpoint's own checks. */
export interface RunStart {
  agent: AnyAgent;
  /** The run's id: the completion's or the response's `id`. */
  id: string;
  input: RunInput;
  /** The conversation before the input; a stored session with messages has its own instead. */
  history: readonly Message[];
  /** Where to store the run (in the session `named`, or in one of its own named `id`); undefined: not stored. */
  store: SessionStore | undefined;
  named: string | undefined;
  outputSchema: JsonSchema | undefined;
  /** The client's own tools (SPEC section 14), when the request sends some. */
  client?: ClientToolRequest | undefined;
}

/** A started run, as `answerRun` takes it (with `release` and `stored` when it is stored). */
export type StartedRun = Pick<RunAnswer, "handle" | "run" | "release" | "stored">;

/**
 * Takes the run's session when it is stored (409 when another request holds it, or when a named
 * session's last run was interrupted), then starts the run, tracked: aborted when the client
 * disconnects. When the agent refuses to start (an `AgentloopError`, e.g. an image over its own
 * limit), the run is ended and the session released before the error goes on to the app's error
 * handler, the one place that answers it.
 */
export async function startRun(
  c: Context<ServerEnv>,
  deps: EndpointDeps,
  s: RunStart,
): Promise<StartedRun | Response> {
  let session: Session | undefined;
  let history = s.history;
  if (s.store) {
    const taken = await takeSession(s.store, s.named ?? s.id, deps.redact);
    if (taken instanceof Response) return taken;
    session = taken;
    const refused = s.named === undefined ? undefined : await refuseInterrupted(session);
    if (refused) return refused;
    if (session.messages.length > 0) history = session.messages;
  }
  const run = deps.runs.start(c.req.raw.signal);
  try {
    const handle = s.agent.stream(s.input.input, {
      runId: s.id,
      signal: run.signal,
      history,
      ...(s.input.instructions !== "" && { instructions: s.input.instructions }),
      ...(session && { sessionId: session.id, checkpoint: storedRun(run, session) }),
      ...(s.outputSchema && { outputSchema: s.outputSchema }),
      ...(s.client && {
        clientTools: s.client.tools,
        ...(s.client.toolChoice !== undefined && { toolChoice: s.client.toolChoice }),
        ...(s.client.parallelToolCalls !== undefined && { parallelToolCalls: s.client.parallelToolCalls }),
      }),
    });
    return session ? { handle, run, release: releaser(session), stored: true } : { handle, run };
  } catch (error) {
    run.end();
    await session?.release().catch(() => {});
    throw error;
  }
}

/** A named session whose last run was interrupted is resumed, not talked over: the 409 saying so (the session released). */
async function refuseInterrupted(session: Session): Promise<Response | undefined> {
  const last = session.lastRun;
  if (last?.status !== "running") return undefined;
  await session.release().catch(() => {});
  return conflict(
    `Session '${session.id}' has an interrupted run (${last.runId}): continue it with POST /v1/runs/${last.runId}/resume before sending a new message.`,
    "run_interrupted",
  );
}
