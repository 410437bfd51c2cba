import type { AnyAgent } from "../agent/agent.js";
import { Session } from "../agent/session.js";
import { errorMessage } from "../core/errors.js";
import type { RunState } from "../core/run-state.js";
import { type SessionStore, type SessionSummary, StoreError } from "../store/types.js";
import type { Metrics } from "./metrics.js";
import type { RunTracker } from "./runs.js";
import { agentForRun, otherModel, storedRun } from "./sessions.js";

export interface OrphanOptions {
  store: SessionStore;
  /** The served agents, by model name: a run goes on with one serving the model it was started with. */
  agents: Readonly<Record<string, AnyAgent>>;
  /** The agent that continues the runs that name no model (or its model). */
  model: string;
  runs: RunTracker;
  metrics: Metrics;
  /** How often to look for interrupted runs. */
  everyMs: number;
  /** At most this many orphans run at once on this server. */
  concurrency: number;
  log: (line: string) => void;
}

/** A client signal that never aborts: an orphan's run has no client; shutdown cuts it through the tracker. */
const NO_CLIENT = new AbortController().signal;

/**
 * Resumes interrupted runs (their process died, or a server was cut at shutdown) by itself, as
 * `POST /v1/runs/{runId}/resume` would: every `everyMs` it asks the store for interrupted
 * sessions (oldest first) and takes each it can. One it cannot continue (a state of a newer
 * agentloop, a model no agent here serves) is logged once and left to other replicas. Taking a
 * session is exclusive in the store (a row lock and a lease in PostgreSQL), so replicas racing
 * for one orphan resume it once. Returns `stop`, which
 * ends the scanning; runs already resumed are tracked by `runs`, so shutdown waits for them
 * (and cuts them, keeping them resumable) like any request.
 */
export function resumeOrphans(o: OrphanOptions): () => void {
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let active = 0;
  /** Orphans this server cannot resume (a state it cannot read, ...): each logged once, then left to others. */
  const skipped = new Set<string>();

  const answers = () =>
    o.store.ping().then(
      () => true,
      () => false,
    );
  const pass = (orphan: SessionSummary, why: string) => {
    skipped.add(orphan.id);
    o.log(
      `interrupted run ${orphan.lastRunId ?? "?"} (session ${orphan.id}) cannot be resumed here (${why.replace(/\.$/, "")}): left for a replica that can`,
    );
  };

  const scan = async () => {
    if (o.concurrency - active <= 0) return;
    // Oldest first, so no orphan waits behind newer ones; the skipped ones are listed too, and passed over.
    const orphans = await o.store.list({
      status: "interrupted",
      limit: o.concurrency - active + skipped.size,
      oldestFirst: true,
    });
    for (const orphan of orphans) {
      if (stopped || active >= o.concurrency) return;
      if (skipped.has(orphan.id)) continue;
      let session: Session;
      try {
        session = await Session.open(o.store, orphan.id);
      } catch (error) {
        // Another replica took it first, or it was removed: not ours.
        if (error instanceof StoreError && error.code === "session_busy") continue;
        // The store failing ends the scan (the next one tries again); a store that answers means this orphan is bad.
        if (error instanceof StoreError && !(await answers())) throw error;
        pass(orphan, errorMessage(error));
        continue;
      }
      const last = session.lastRun;
      const chosen = last && agentForRun(o.agents, o.model, last);
      if (last?.status !== "running" || !chosen) {
        await session.release().catch(() => {});
        if (last?.status === "running") pass(orphan, otherModel(last, o.agents));
        continue;
      }
      active++;
      void finish(session, last, chosen).finally(() => {
        active--;
      });
    }
  };

  const finish = async (session: Session, last: RunState, [model, agent]: [string, AnyAgent]) => {
    const { runId } = last;
    const run = o.runs.start(NO_CLIENT);
    try {
      o.log(`resuming interrupted run ${runId} (session ${session.id})`);
      const handle = agent.resume(last, { signal: run.signal, checkpoint: storedRun(run, session) });
      for await (const _event of handle);
      const result = await handle.result;
      o.metrics.record(model, result);
      o.metrics.orphanResumed();
      const outcome = run.cut ? "cut by the shutdown (still resumable)" : result.stopReason;
      o.log(`resumed run ${runId} (session ${session.id}): ${outcome}`);
    } catch (error) {
      o.log(`resuming run ${runId} (session ${session.id}) failed: ${errorMessage(error)}`);
    } finally {
      await session.release().catch(() => {});
      run.end();
    }
  };

  const tick = () => {
    timer = undefined;
    if (stopped) return;
    scan()
      .catch((error: unknown) => o.log(`looking for interrupted runs failed: ${errorMessage(error)}`))
      .finally(() => {
        if (!stopped) timer = setTimeout(tick, o.everyMs).unref();
      });
  };
  timer = setTimeout(tick, 0).unref();
  return () => {
    stopped = true;
    if (timer) clearTimeout(timer);
  };
}
