// A checkpoint written to PostgreSQL: the session's row touched (only by its holder, and only at the
// log's expected length), its new messages appended, its run upserted.
import type { PoolClient } from "pg";
import { clock, type encodeCheckpoint, runOfOtherSession } from "./shared.js";
import { StoreError } from "./types.js";

/** The lease as SQL: `$3` is its length in milliseconds. */
export const LEASE = "now() + make_interval(secs => $3::double precision / 1000)";

/** Who writes: the session, its holder and lease, the messages it knows are in the log. */
export interface Held {
  sessionId: string;
  holder: string;
  leaseMs: number;
  /** Messages in the log: the holder is the only writer while it holds the session. */
  count: number;
  /** Called when the session turns out to be held by another (before the error is thrown). */
  takenOver(): void;
}

/**
 * One attempt's rows: the log grows from `count` to `count + messages.length` and the run is
 * upserted, or a `StoreError` says why not (`session_busy` when another holds the session). A retry
 * (`retry`) of a write whose COMMIT went through before the connection broke finds it done.
 */
export async function writeCheckpoint(
  client: PoolClient,
  held: Held,
  messages: string[],
  run: ReturnType<typeof encodeCheckpoint>["run"],
  retry: boolean,
): Promise<void> {
  const { sessionId, holder, leaseMs, count } = held;
  const now = clock();
  const touched = await client.query<{ message_count: number }>(
    `UPDATE agentloop_sessions SET updated_at = $4, message_count = $5::integer + $6::integer,
         last_run_id = coalesce($7, last_run_id), lease_until = ${LEASE}
       WHERE id = $1 AND holder = $2 AND message_count = $5 RETURNING message_count`,
    [sessionId, holder, leaseMs, now, count, messages.length, run?.runId ?? null],
  );
  if (touched.rows[0] === undefined) {
    const row = (
      await client.query<{ message_count: number; holder: string | null }>(
        "SELECT message_count, holder FROM agentloop_sessions WHERE id = $1",
        [sessionId],
      )
    ).rows[0];
    if (row?.holder !== holder) {
      held.takenOver();
      throw new StoreError(
        "session_busy",
        `session '${sessionId}' is no longer held by this process (its lease expired and another took it): acquire it again before writing`,
      );
    }
    // A retry of a write whose COMMIT went through before the connection broke: done.
    if (retry && row.message_count === count + messages.length && messages.length > 0) return;
    throw new StoreError(
      "store_error",
      `session '${sessionId}' has ${row.message_count} stored messages where this process expected ${count}: acquire it again`,
    );
  }
  if (messages.length > 0)
    await client.query(
      `INSERT INTO agentloop_messages (session_id, seq, message)
         SELECT $1, $2::integer + ord - 1, m FROM unnest($3::text[]) WITH ORDINALITY AS t(m, ord)`,
      [sessionId, count, messages],
    );
  if (run === undefined) return;
  const { runId, status, stopReason, state } = run;
  const upsert = await client.query(
    `INSERT INTO agentloop_runs (run_id, session_id, status, stop_reason, state, created_at, updated_at)
       VALUES ($1, $2, $3, $4, $5, $6, $6)
       ON CONFLICT (run_id) DO UPDATE SET status = excluded.status, stop_reason = excluded.stop_reason,
         state = excluded.state, updated_at = excluded.updated_at
       WHERE agentloop_runs.session_id = excluded.session_id`,
    [runId, sessionId, status, stopReason, state, now],
  );
  if (upsert.rowCount === 0) {
    const owner = await client.query<{ session_id: string }>(
      "SELECT session_id FROM agentloop_runs WHERE run_id = $1",
      [runId],
    );
    throw runOfOtherSession(runId, String(owner.rows[0]?.session_id));
  }
}
