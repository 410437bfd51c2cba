// The PostgreSQL store's rows as the store's records: a session's summary (the SQL that selects it
// included), its messages and last run, and the error of a session held by another.
import type { PoolClient } from "pg";
import { describeHolder, parseHolder } from "./holder.js";
import { decodeMessage, sessionStatus } from "./shared.js";
import {
  type RunRecord,
  type RunRecordStatus,
  type SessionSummary,
  type StoredSession,
  StoreError,
} from "./types.js";

/** A row of `SUMMARY`: a session, whether a live lease holds it, and its last run's status. */
export interface Row {
  id: string;
  created_at: number;
  updated_at: number;
  message_count: number;
  last_run_id: string | null;
  holder: string | null;
  held: boolean;
  status: RunRecordStatus | null;
  stop_reason: string | null;
}

interface RunRow {
  run_id: string;
  session_id: string;
  status: RunRecordStatus;
  stop_reason: string | null;
  state: string;
  created_at: number;
  updated_at: number;
}

export const SUMMARY = `SELECT s.id, s.created_at, s.updated_at, s.message_count, s.last_run_id, s.holder,
  (s.holder IS NOT NULL AND s.lease_until > now()) AS held, r.status, r.stop_reason
  FROM agentloop_sessions s LEFT JOIN agentloop_runs r ON r.run_id = s.last_run_id`;

export function summary(row: Row, held: boolean): SessionSummary {
  return {
    id: row.id,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    messageCount: row.message_count,
    status: sessionStatus(held, row.status === null ? undefined : { status: row.status }),
    ...(row.stop_reason ? { stopReason: row.stop_reason } : {}),
    ...(row.last_run_id === null ? {} : { lastRunId: row.last_run_id }),
  };
}

function runRecord(row: RunRow): RunRecord {
  return {
    runId: row.run_id,
    sessionId: row.session_id,
    status: row.status,
    ...(row.stop_reason === null ? {} : { stopReason: row.stop_reason }),
    state: JSON.parse(row.state),
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

export async function stored(client: PoolClient, row: Row, held: boolean): Promise<StoredSession> {
  const messages = await client.query<{ message: string }>(
    "SELECT message FROM agentloop_messages WHERE session_id = $1 ORDER BY seq",
    [row.id],
  );
  const run =
    row.last_run_id === null
      ? undefined
      : (await client.query<RunRow>("SELECT * FROM agentloop_runs WHERE run_id = $1", [row.last_run_id]))
          .rows[0];
  return {
    summary: summary(row, held),
    messages: messages.rows.map((m) => decodeMessage(m.message)),
    ...(run ? { lastRun: runRecord(run) } : {}),
  };
}

export function busy(sessionId: string, row: Row): StoreError {
  const parsed = row.holder === null ? undefined : parseHolder(row.holder);
  const holder = parsed ? describeHolder(parsed) : "another process";
  return new StoreError(
    "session_busy",
    `session '${sessionId}' is in use by ${holder}: wait for it to finish, or use another session id`,
    { holder },
  );
}
