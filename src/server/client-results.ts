import type { Context } from "hono";
import type { RunHandle } from "../agent/handle.js";
import { AgentloopError } from "../core/errors.js";
import { echoed } from "../core/redact.js";
import { type ClientToolRequest, type PlacedResults, resultsOf } from "./client-tools.js";
import { errorResponse } from "./errors.js";
import type { ServerEnv } from "./request-log.js";
import { answerRun, type RunWire } from "./respond.js";
import { agentFor, type EndpointDeps } from "./run-request.js";
import { agentForRun, conflict, noStore, otherModel, releaser, storedRun, takeSession } from "./sessions.js";

/** A request that carries the results of the client's tool calls: what continues the run that waits on them. */
export interface ResultsRequest extends PlacedResults {
  /** Where the results are in the request (`messages`, `input`), for errors. */
  param: string;
  /** The model the request names; default the one serving the run's model. */
  model: string | undefined;
  /** The request's own tools, offered from now on in place of the run's; undefined: keep the run's. */
  client: ClientToolRequest | undefined;
  stream: boolean;
  includeUsage: boolean;
  /** The answer's wire for the run (default chat completion chunks). */
  wire?: (handle: RunHandle, model: string) => RunWire<unknown>;
}

/**
 * Continues a stored run that waits for the results of the client's tool calls (SPEC section 14):
 * the results go in, the run goes on, and the answer is the run's (same `id`), as the request that
 * started it would have had. Order of checks: store (501), model (404), run (404), session (409),
 * run state (409), the run's model (409), the results: one for each waiting call (400).
 */
export async function continueWithResults(
  c: Context<ServerEnv>,
  deps: EndpointDeps,
  r: ResultsRequest,
): Promise<Response> {
  const { store } = deps;
  if (!store) return noStore("Sending tool results (continuing the run that waits on them)");
  const found = agentFor(deps, r.model);
  if (found instanceof Response) return found;
  const sessionId = await store.sessionOfRun(r.runId);
  if (sessionId === undefined) {
    const message = `${r.param}: no run '${echoed(r.runId)}' is stored here: tool results continue the run whose response asked for them, on a server sharing its store.`;
    return errorResponse(404, message, "run_not_found", { param: r.param });
  }
  const busy = `Run ${r.runId} is busy: another request (on this server or another sharing the store) holds its session '${sessionId}'.`;
  const session = await takeSession(store, sessionId, deps.redact, busy);
  if (session instanceof Response) return session;
  const release = releaser(session);
  const last = session.lastRun;
  const chosen = last && r.model === undefined ? agentForRun(deps.agents, deps.defaultModel, last) : found;
  let refused: Response | undefined;
  if (last?.runId !== r.runId) {
    refused = conflict(
      `Run ${r.runId} is over: its session '${sessionId}' has moved on to run ${last?.runId}.`,
      "run_superseded",
    );
  } else if (last.status !== "awaiting_tools") {
    refused = conflict(
      `Run ${r.runId} is not waiting for tool results (${last.status === "completed" ? `it has completed: ${last.stopReason}` : last.status}): send a new user message instead.`,
      "run_not_waiting",
    );
  } else if (!chosen) {
    refused = conflict(
      `${otherModel(last, deps.agents)}: continue it on a replica that serves '${last.model}', or name a served model in "model".`,
      "model_mismatch",
    );
  }
  if (refused || !last || !chosen) {
    await release();
    return refused as Response;
  }
  const [model, agent] = chosen;
  const toolResults = resultsOf(last, r);
  if ("param" in toolResults) {
    await release();
    return errorResponse(400, toolResults.message, "invalid_tool_results", { param: toolResults.param });
  }
  const run = deps.runs.start(c.req.raw.signal);
  let handle: RunHandle;
  try {
    handle = agent.resume(last, {
      toolResults,
      signal: run.signal,
      checkpoint: storedRun(run, session),
      ...(r.client && {
        clientTools: r.client.tools,
        ...(r.client.toolChoice !== undefined && { toolChoice: r.client.toolChoice }),
        ...(r.client.parallelToolCalls !== undefined && { parallelToolCalls: r.client.parallelToolCalls }),
      }),
    });
  } catch (error) {
    run.end();
    await release();
    // A result for a call that does not wait, or a waiting call without one: the message names them.
    if (
      error instanceof AgentloopError &&
      (error.code === "invalid_state" || error.code === "invalid_option")
    )
      return errorResponse(400, deps.redact(error.message), "invalid_tool_results", { param: r.param });
    throw error;
  }
  return answerRun(c, deps, {
    handle,
    run,
    id: r.runId,
    model,
    stream: r.stream,
    includeUsage: r.includeUsage,
    release,
    stored: true,
    ...(r.wire && { wire: r.wire(handle, model) }),
  });
}
