import type { AnyAgent } from "../agent/agent.js";
import { Session } from "../agent/session.js";
import type { RunState } from "../core/run-state.js";
import { type SessionStore, StoreError } from "../store/types.js";
import { errorResponse, type Redact } from "./errors.js";
import type { TrackedRun } from "./runs.js";

/** The request header naming the session a chat completion continues (SPEC section 9). */
export const SESSION_HEADER = "x-agentloop-session";

/** Clients are told not to retry these: the same request would get the same answer. */
const NO_RETRY = { headers: { "x-should-retry": "false" } };

/** The 501 of a request that needs stored runs from a server that has no store. */
export function noStore(what: string): Response {
  return errorResponse(
    501,
    `${what} needs stored runs, and this server has no store: start agentloop serve without --no-store (it stores in AGENTLOOP_DB, "db" in the config file, or .agentloop/agentloop.db), or pass createApp a store.`,
    "no_store",
    NO_RETRY,
  );
}

/** A 409 (the run or session is not in a state to do that now), not retried by the official clients. */
export function conflict(message: string, code: string): Response {
  return errorResponse(409, message, code, NO_RETRY);
}

/**
 * Takes a session for one request, or the error response saying why not: 409 when another
 * request (or another process sharing the store) holds it (`busy` says so), 400 for an invalid id.
 * @throws StoreError for store failures (the app answers 500).
 */
export async function takeSession(
  store: SessionStore,
  sessionId: string,
  redact: Redact,
  busy = `Session '${sessionId}' is in use by another request: wait for its answer, or use another session.`,
): Promise<Session | Response> {
  try {
    return await Session.open(store, sessionId);
  } catch (error) {
    if (!(error instanceof StoreError)) throw error;
    if (error.code === "session_busy") {
      return conflict(busy, "session_busy");
    }
    if (error.code === "invalid_session_id") {
      return errorResponse(400, redact(`X-Agentloop-Session: ${error.message}.`), "invalid_session_id", {
        param: SESSION_HEADER,
      });
    }
    throw error;
  }
}

/** A release that never rejects: a session whose release failed stays held by this live process until it ends. */
export function releaser(session: Session): () => Promise<void> {
  return () => session.release().catch(() => {});
}

/**
 * Ties a tracked run to its session: the run stops when the session is lost (its lease taken
 * over by another replica), and the checkpoint to run with, which keeps the run resumable when
 * the server cuts it at its shutdown deadline (the last state stored stays `running`, so the
 * run is interrupted, not aborted, and any replica sharing the store resumes it).
 */
export function storedRun(run: TrackedRun, session: Session): (state: RunState) => Promise<void> {
  const { lost } = session;
  if (lost) {
    if (lost.aborted) run.abort();
    else lost.addEventListener("abort", run.abort, { once: true });
  }
  // Once cut, nothing more is written: not the results of the calls the cut aborted, not the stop.
  return (state) => (run.cut ? Promise.resolve() : session.checkpoint(state));
}

/**
 * The served agent that continues a stored run: `preferred` when the run names no model or the
 * same one, else the first agent serving the run's model; undefined when none does (a replica
 * deployed with another model must not continue it silently).
 */
export function agentForRun(
  agents: Readonly<Record<string, AnyAgent>>,
  preferred: string,
  state: RunState,
): [string, AnyAgent] | undefined {
  const first = Object.hasOwn(agents, preferred) ? agents[preferred] : undefined;
  if (first && (state.model === undefined || first.options.model.id === state.model))
    return [preferred, first];
  return Object.entries(agents).find(([, agent]) => agent.options.model.id === state.model);
}

/** Why a run cannot be continued here: its model is not served. */
export function otherModel(state: RunState, agents: Readonly<Record<string, AnyAgent>>): string {
  const served = Object.keys(agents)
    .map((name) => `'${name}'`)
    .join(", ");
  return `Run ${state.runId} was started with model '${state.model}', which this server does not serve (it serves ${served})`;
}
