// What every store does the same way: id checks, encoding a checkpoint, a session's status.
import type { Message } from "../core/messages.js";
import {
  type Checkpoint,
  type ListFilter,
  type RunRecordStatus,
  SESSION_ID_PATTERN,
  type SessionSummary,
  StoreError,
} from "./types.js";

/**
 * Milliseconds since the epoch with a fraction (sub-microsecond steps), so that `list()` can
 * order sessions by their last update without a counter that every checkpoint would have to bump.
 */
export const clock = (): number => performance.timeOrigin + performance.now();

export function checkSessionId(sessionId: unknown): asserts sessionId is string {
  if (typeof sessionId === "string" && SESSION_ID_PATTERN.test(sessionId)) return;
  const shown = typeof sessionId === "string" ? JSON.stringify(sessionId.slice(0, 60)) : String(sessionId);
  throw new StoreError(
    "invalid_session_id",
    `invalid session id ${shown}: use 1 to 128 characters of A-Z a-z 0-9 . _ -`,
  );
}

/** A checkpoint as JSON text, encoded before anything is written (so a value that cannot be stored writes nothing). */
export interface EncodedCheckpoint {
  messages: string[];
  run?: { runId: string; status: RunRecordStatus; stopReason: string | null; state: string };
}

const STATUSES: ReadonlySet<string> = new Set<RunRecordStatus>(["running", "waiting", "completed"]);

export function encodeCheckpoint(checkpoint: Checkpoint): EncodedCheckpoint {
  const messages = (checkpoint.messages ?? []).map((message, index) =>
    encode(message, `message ${index} of the checkpoint`),
  );
  const run = checkpoint.run;
  if (run === undefined) return { messages };
  if (typeof run.runId !== "string" || run.runId.length === 0 || run.runId.length > 256)
    throw new StoreError("store_error", "a run record needs a runId of 1 to 256 characters");
  if (!STATUSES.has(run.status))
    throw new StoreError(
      "store_error",
      `run ${run.runId}: status ${JSON.stringify(run.status)} is not running, waiting or completed`,
    );
  const state = encode(run.state, `the state of run ${run.runId}`);
  return {
    messages,
    run: { runId: run.runId, status: run.status, stopReason: run.stopReason ?? null, state },
  };
}

function encode(value: unknown, what: string): string {
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (error) {
    throw new StoreError(
      "store_error",
      `${what} cannot be stored as JSON (${error instanceof Error ? error.message : String(error)}): nothing was written`,
      { cause: error },
    );
  }
  if (text === undefined)
    throw new StoreError("store_error", `${what} is not a JSON value: nothing was written`);
  return text;
}

export const decodeMessage = (text: string): Message => JSON.parse(text) as Message;

/** `held`: a live process holds the session now. */
export function sessionStatus(
  held: boolean,
  lastRun: { status: RunRecordStatus } | undefined,
): SessionSummary["status"] {
  if (held) return "running";
  if (lastRun === undefined) return "new";
  return lastRun.status === "running" ? "interrupted" : lastRun.status;
}

export const storeClosed = () =>
  new StoreError("closed", "the session store is closed: open a new one to use sessions");

export const handleReleased = (sessionId: string) =>
  new StoreError(
    "closed",
    `session '${sessionId}' was released by this handle: acquire it again to write to it`,
  );

export const heldHere = (sessionId: string) =>
  new StoreError(
    "session_busy",
    `session '${sessionId}' is already in use in this process: release it first or use another session id`,
  );

export const runOfOtherSession = (runId: string, sessionId: string) =>
  new StoreError(
    "store_error",
    `run ${runId} belongs to session '${sessionId}': a run id is stored under one session only`,
  );

/** The summaries a `list()` filter selects, in the order given (newest first), or reversed for `oldestFirst`. */
export function filtered(summaries: SessionSummary[], filter: ListFilter | undefined): SessionSummary[] {
  if (!filter) return summaries;
  const { status, limit, oldestFirst } = filter;
  const kept = status === undefined ? summaries : summaries.filter((s) => s.status === status);
  const ordered = oldestFirst ? [...kept].reverse() : kept;
  return limit === undefined ? ordered : ordered.slice(0, Math.max(0, limit));
}
