import type { AnyAgent } from "../agent/agent.js";
import { Session } from "../agent/session.js";
import { errorMessage } from "../core/errors.js";
import { type SessionStore, StoreError } from "../store/types.js";
import type { Metrics } from "./metrics.js";
import type { RunTracker } from "./runs.js";
import { storedRun } from "./sessions.js";

export interface OrphanOptions {
  store: SessionStore;
  /** The agent that continues the runs, served as `model`. */
  agent: AnyAgent;
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
 * sessions and takes each it can. Taking a session is exclusive in the store (a row lock and a
 * lease in PostgreSQL), so replicas racing for one orphan resume it once. Returns `stop`, which
 * ends the scanning; runs already resumed are tracked by `runs`, so shutdown waits for them
 * (and cuts them, keeping them resumable) like any request.
 */
export function resumeOrphans(o: OrphanOptions): () => void {
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let active = 0;
  /** Orphans this server cannot resume (a state it cannot read, ...): each logged once, then left to others. */
  const skipped = new Set<string>();

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
        if (
          error instanceof StoreError &&
          !(await o.store.ping().then(
            () => true,
            () => false,
          ))
        )
          throw error;
        skipped.add(orphan.id);
        o.log(
          `interrupted run ${orphan.lastRunId ?? "?"} (session ${orphan.id}) cannot be resumed here (${errorMessage(error).replace(/\.$/, "")}): left for a replica that can`,
        );
        continue;
      }
      const last = session.lastRun;
      if (last?.status !== "running") {
        await session.release().catch(() => {});
        continue;
      }
      active++;
      void finish(session, last.runId).finally(() => {
        active--;
      });
    }
  };

  const finish = async (session: Session, runId: string) => {
    const run = o.runs.start(NO_CLIENT);
    try {
      const last = session.lastRun;
      if (!last) return;
      o.log(`resuming interrupted run ${runId} (session ${session.id})`);
      const handle = o.agent.resume(last, { signal: run.signal, checkpoint: storedRun(run, session) });
      for await (const _event of handle);
      const result = await handle.result;
      o.metrics.record(o.model, result);
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
