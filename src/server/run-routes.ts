import type { Context } from "hono";
import { z } from "zod";
import type { RunHandle } from "../agent/handle.js";
import { checkRunState, historyOfLog, pendingApprovals, type RunState } from "../agent/state.js";
import { AgentloopError } from "../core/errors.js";
import type { PendingApproval } from "../core/events.js";
import { echoed } from "../core/redact.js";
import { errorResponse } from "./errors.js";
import { describeRequestIssue } from "./openai-compat.js";
import type { ServerEnv } from "./request-log.js";
import { answerRun } from "./respond.js";
import { agentFor, type EndpointDeps } from "./run-request.js";
import { agentForRun, conflict, noStore, otherModel, releaser, storedRun, takeSession } from "./sessions.js";

/**
 * The stored runs' endpoints (SPEC section 9): `GET /v1/runs/{runId}`, and
 * `POST /v1/runs/{runId}/approvals` and `/resume`, which continue a run and answer exactly like
 * a chat completion (same `id`, the run's; streaming with `"stream": true`).
 */

const options = {
  /** The served agent to continue the run with; default one serving the model the run was started with. */
  model: z.string().optional(),
  stream: z.boolean().nullish(),
  stream_options: z.object({ include_usage: z.boolean().optional() }).loose().nullish(),
};
const callIds = z.union([
  z.literal("all"),
  z.array(z.string(), { error: 'a list of call ids, or "all"' }).max(1024),
]);
const resumeSchema = z.object(options).loose();
const approvalsSchema = z
  .object({ ...options, approve: callIds.optional(), deny: callIds.optional() })
  .loose();

/** One line on where a run stands and how to go on with it, for 409s. */
function standing(state: RunState, sessionId: string): string {
  switch (state.status) {
    case "completed":
      return `it has completed (${state.stopReason})`;
    case "awaiting_approval":
      return `it waits for approvals: POST /v1/runs/${state.runId}/approvals`;
    case "awaiting_answer":
      return `it waits for the answer to its question: send it as a chat message with the header X-Agentloop-Session: ${sessionId}`;
    case "awaiting_tools":
      return "it waits for the results of the client's tool calls: send them as tool messages (function_call_output items)";
    case "running":
      return `it was interrupted: POST /v1/runs/${state.runId}/resume continues it`;
  }
}

const runNotFound = (runId: string) =>
  errorResponse(
    404,
    `No run '${echoed(runId)}' is stored here: a run id is the \`id\` of a chat completion answered by a server with this store.`,
    "run_not_found",
  );

/** The body as JSON; an empty body is `{}` when `optional`. */
async function jsonOf(c: Context, optional: boolean): Promise<unknown> {
  const text = await c.req.text();
  if (optional && text.trim() === "") return {};
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * `POST /v1/runs/{runId}/approvals` (`{"approve": [ids] | "all", "deny": [ids] | "all"}`) or
 * `/resume` (a run whose process died: status running, its session held by nobody). Order of
 * checks: body (400), store (501), model (404), run (404), session (409), run state (409), the
 * run's model (409 `model_mismatch` when no served agent has it and the request names none), call
 * ids (400).
 */
export async function continueRun(
  c: Context<ServerEnv>,
  deps: EndpointDeps,
  kind: "approvals" | "resume",
): Promise<Response> {
  const runId = c.req.param("runId") as string;
  const raw = await jsonOf(c, kind === "resume");
  if (raw === undefined) return errorResponse(400, "The request body is not valid JSON.", "invalid_json");
  const parsed = (kind === "approvals" ? approvalsSchema : resumeSchema).safeParse(raw);
  if (!parsed.success) {
    const { message, param } = describeRequestIssue(parsed.error);
    return errorResponse(400, message, "invalid_request", { param });
  }
  const request = parsed.data as z.infer<typeof approvalsSchema>;
  const { approve, deny } = request;
  if (kind === "approvals") {
    const problem = decisionProblem(approve, deny);
    if (problem) return errorResponse(400, problem, "invalid_request", { param: "approve" });
  }
  const { store } = deps;
  if (!store) return noStore(`POST /v1/runs/{runId}/${kind}`);
  // A model named in the request is the one to go on with; else the one serving the run's model.
  const found = agentFor(deps, request.model);
  if (found instanceof Response) return found;
  const sessionId = await store.sessionOfRun(runId);
  if (sessionId === undefined) return runNotFound(runId);
  const busy =
    kind === "resume"
      ? `Run ${runId} is not interrupted: a request (on this server or another sharing the store) is running it now.`
      : `Run ${runId} is busy: another request (on this server or another sharing the store) holds its session '${sessionId}'.`;
  const session = await takeSession(store, sessionId, deps.redact, busy);
  if (session instanceof Response) return session;
  const release = releaser(session);

  const last = session.lastRun;
  let refused: Response | undefined;
  if (last?.runId !== runId) {
    refused = conflict(
      `Run ${runId} is over: its session '${sessionId}' has moved on to run ${last?.runId}.`,
      "run_superseded",
    );
  } else if (kind === "approvals" && last.status !== "awaiting_approval") {
    refused = conflict(
      `Run ${runId} is not waiting for approvals: ${standing(last, sessionId)}.`,
      "run_not_waiting",
    );
  } else if (kind === "resume" && last.status !== "running") {
    refused = conflict(
      `Run ${runId} was not interrupted: ${standing(last, sessionId)}.`,
      "run_not_interrupted",
    );
  }
  const chosen =
    last && request.model === undefined ? agentForRun(deps.agents, deps.defaultModel, last) : found;
  if (!refused && last && !chosen) {
    refused = conflict(
      `${otherModel(last, deps.agents)}: continue it on a replica that serves '${last.model}', or name a served model in "model" to continue it with that one.`,
      "model_mismatch",
    );
  }
  if (refused || !last || !chosen) {
    await release();
    return refused as Response;
  }
  const [model, agent] = chosen;

  const run = deps.runs.start(c.req.raw.signal);
  let handle: RunHandle;
  try {
    handle = agent.resume(last, {
      ...(approve !== undefined && { approve }),
      ...(deny !== undefined && { deny }),
      signal: run.signal,
      checkpoint: storedRun(run, session),
    });
  } catch (error) {
    run.end();
    await release();
    // A decision on a call that does not wait: the message names the calls that do.
    if (error instanceof AgentloopError && error.code === "invalid_state") {
      return errorResponse(400, deps.redact(error.message), "unknown_call", { param: "approve" });
    }
    throw error;
  }
  return answerRun(c, deps, {
    handle,
    run,
    id: runId,
    model,
    stream: request.stream === true,
    includeUsage: request.stream_options?.include_usage === true,
    release,
    stored: true,
  });
}

/** Why a set of decisions cannot be taken, if it cannot: none at all, or a call both approved and denied. */
function decisionProblem(
  approve: readonly string[] | "all" | undefined,
  deny: typeof approve,
): string | undefined {
  const none = (list: typeof approve) => list === undefined || (list !== "all" && list.length === 0);
  if (none(approve) && none(deny)) {
    return 'Nothing to decide: send {"approve": [call ids] or "all"} and/or {"deny": [...]} (the ids are the turn_complete pendingApprovals).';
  }
  if (approve === "all" && deny === "all") return 'approve and deny cannot both be "all".';
  const denied = new Set(deny === "all" || deny === undefined ? [] : deny);
  const both = approve === "all" || approve === undefined ? undefined : approve.find((id) => denied.has(id));
  return both === undefined ? undefined : `Call '${echoed(both)}' is both approved and denied: decide once.`;
}

/** What `GET /v1/runs/{runId}` answers. */
export interface RunView {
  id: string;
  object: "agentloop.run";
  sessionId: string;
  /**
   * `running` (a request is running it), `interrupted` (its process died: `/resume`), `waiting`
   * (for approvals or an answer), `completed`, or `superseded` (an earlier run of a session
   * that has moved on; `latestRunId` names the newest).
   */
  status: "running" | "interrupted" | "waiting" | "completed" | "superseded";
  stopReason?: string;
  pendingApprovals?: PendingApproval[];
  output?: string;
  iterations?: number;
  latestRunId?: string;
}

/** `GET /v1/runs/{runId}`: where a stored run stands. */
export async function getRun(c: Context<ServerEnv>, deps: EndpointDeps): Promise<Response> {
  const { store } = deps;
  if (!store) return noStore("GET /v1/runs/{runId}");
  const runId = c.req.param("runId") as string;
  const sessionId = await store.sessionOfRun(runId);
  const stored = sessionId === undefined ? undefined : await store.read(sessionId);
  if (sessionId === undefined || !stored) return runNotFound(runId);
  const last = stored.lastRun;
  const view: RunView = { id: runId, object: "agentloop.run", sessionId, status: "superseded" };
  if (!last || last.runId !== runId) return c.json({ ...view, ...(last && { latestRunId: last.runId }) });
  const state = checkRunState({ ...(last.state as object), messages: historyOfLog(stored.messages) });
  const status = stored.summary.status === "new" ? "running" : stored.summary.status;
  return c.json({
    ...view,
    status,
    ...(state.stopReason !== undefined && { stopReason: state.stopReason }),
    ...(state.status === "awaiting_approval" && {
      pendingApprovals: pendingApprovals(state),
    }),
    output: state.output,
    iterations: state.iteration,
  } satisfies RunView);
}
