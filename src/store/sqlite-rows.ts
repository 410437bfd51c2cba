// The SQLite store's rows as the store's records: a session's summary and its last run, whether a
// live process holds it, and the error of a session held by another.
import type { SQLOutputValue } from "node:sqlite";
import { describeHolder, type Holder, holderAlive, parseHolder } from "./holder.js";
import { sessionStatus } from "./shared.js";
import {
  type RunRecord,
  type RunRecordStatus,
  type SessionSummary,
  StoreError,
  type TakeOver,
} from "./types.js";

export type Row = Record<string, SQLOutputValue>;

/** The live holder of a summary row, if any. */
export function liveHolder(row: Row): Holder | undefined {
  if (typeof row.holder !== "string") return undefined;
  const holder = parseHolder(row.holder);
  return holder && holderAlive(holder) ? holder : undefined;
}

export function summary(row: Row, held: boolean): SessionSummary {
  const status = row.status as RunRecordStatus | null;
  return {
    id: String(row.id),
    createdAt: Number(row.created_at),
    updatedAt: Number(row.updated_at),
    messageCount: Number(row.message_count),
    status: sessionStatus(held, status === null ? undefined : { status }),
    ...(typeof row.stop_reason === "string" && row.stop_reason ? { stopReason: row.stop_reason } : {}),
    ...(typeof row.last_run_id === "string" ? { lastRunId: row.last_run_id } : {}),
  };
}

export function runRecord(row: Row | undefined): RunRecord | undefined {
  if (row === undefined) return undefined;
  return {
    runId: String(row.run_id),
    sessionId: String(row.session_id),
    status: row.status as RunRecordStatus,
    ...(typeof row.stop_reason === "string" ? { stopReason: row.stop_reason } : {}),
    state: JSON.parse(String(row.state)),
    createdAt: Number(row.created_at),
    updatedAt: Number(row.updated_at),
  };
}

function busy(sessionId: string, holder: Holder): StoreError {
  return new StoreError(
    "session_busy",
    `session '${sessionId}' is in use by ${describeHolder(holder)}: wait for it to finish, or use another session id`,
    { holder: describeHolder(holder) },
  );
}

/** A live holder's session is refused, or taken over when forced (the caller told who held it). */
export function takeOver(sessionId: string, live: Holder, options: TakeOver | undefined): void {
  if (!options?.force) throw busy(sessionId, live);
  options.onTakeOver?.(describeHolder(live));
}
