import type { Message } from "../core/messages.js";

/**
 * Where sessions live (SPEC section 9): one interface, an in-memory, a SQLite and (later) a
 * PostgreSQL implementation, all passing one contract suite. Every method is async and every
 * write is one transaction, so a networked store fits the same shape.
 *
 * The model: a session is an append-only log of messages plus its runs. A run's state is
 * stored as an opaque JSON value next to the log (the run state without its messages); the
 * log and the run record change together in one `checkpoint`, so a process killed at any
 * moment leaves either both or neither.
 */

/** Session ids: 1 to 128 of `A-Z a-z 0-9 . _ -`. */
export const SESSION_ID_PATTERN = /^[A-Za-z0-9._-]{1,128}$/;

/** A JSON value, as the store keeps it. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/**
 * A run's status as the store keeps it: the run state's `RunStatus` (the root export's), with
 * `awaiting_approval`, `awaiting_answer` and `awaiting_tools` all `waiting` (for approvals after
 * `approval_required`, for an answer after `ask_question`, for a server client's tool results after
 * `tool_calls`).
 */
export type RunRecordStatus = "running" | "waiting" | "completed";

/** What a checkpoint writes about a run. */
export interface RunRecordInput {
  runId: string;
  status: RunRecordStatus;
  /** Set once the run has stopped (also for `waiting`: `ask_question` or `approval_required`). */
  stopReason?: string;
  /** The serialised run state without its messages; opaque to the store. */
  state: Json;
}

export interface RunRecord extends RunRecordInput {
  sessionId: string;
  /** Milliseconds since the epoch. */
  createdAt: number;
  updatedAt: number;
}

/**
 * A session as `agentloop sessions` lists it. `status`: `new` (no run yet), `running` (held by a
 * live process), `interrupted` (its last run was `running` and nobody holds it: the process
 * died), `waiting` or `completed` (then `stopReason` says why).
 */
export interface SessionSummary {
  id: string;
  createdAt: number;
  updatedAt: number;
  messageCount: number;
  status: "new" | "running" | "interrupted" | "waiting" | "completed";
  stopReason?: string;
  lastRunId?: string;
}

export interface StoredSession {
  summary: SessionSummary;
  /** The log, in the order it was appended. */
  messages: Message[];
  /** The session's most recent run, if any. */
  lastRun?: RunRecord;
}

/** One atomic write: messages appended to the log (in this order) and/or a run record upserted. */
export interface Checkpoint {
  messages?: readonly Message[];
  run?: RunRecordInput;
}

/** A session held by this process: the only way to write to it. */
export interface SessionHandle {
  readonly sessionId: string;
  /** The session when it was acquired (empty and without `lastRun` for a new one). */
  readonly session: StoredSession;
  /** Writes one checkpoint atomically; resolves once it is durable. Rejects with `StoreError`. */
  checkpoint(checkpoint: Checkpoint): Promise<void>;
  /** Gives the session up (idempotent). A process that dies gives it up too. */
  release(): Promise<void>;
  /**
   * Aborts when this handle has lost the session without releasing it (a networked store whose
   * lease expired and was taken over): the run must stop, its writes are refused anyway.
   */
  readonly lost?: AbortSignal;
}

/** Which sessions `list()` returns. */
export interface ListFilter {
  /** Only sessions of this status, e.g. `interrupted` (runs whose process died, to resume). */
  status?: SessionSummary["status"];
  /** At most this many (the most recently updated first). */
  limit?: number;
  /** The least recently updated first instead (what waited longest, e.g. orphans to resume). */
  oldestFirst?: boolean;
}

export interface SessionStore {
  /**
   * Takes the session for this process, creating it when it does not exist. Exclusive: while a
   * live holder has it, this rejects with `StoreError` code `session_busy`. A holder whose process
   * died does not hold it any more (on one machine this is recognised at once).
   */
  acquire(sessionId: string, options?: TakeOver): Promise<SessionHandle>;
  /** The session, read without taking it; `undefined` when there is none. */
  read(sessionId: string): Promise<StoredSession | undefined>;
  /** Every session (or those the filter selects), most recently updated first (or oldest first). */
  list(filter?: ListFilter): Promise<SessionSummary[]>;
  /** The session a run belongs to (the server continues runs by id). */
  sessionOfRun(runId: string): Promise<string | undefined>;
  /** Deletes a session and its runs; false when there was none. Rejects `session_busy` while held (unless forced). */
  remove(sessionId: string, options?: TakeOver): Promise<boolean>;
  /** Resolves when the store answers (a round trip to a networked one); rejects with `StoreError` otherwise. */
  ping(): Promise<void>;
  /** Closes the store; handles still held are released. Idempotent. */
  close(): Promise<void>;
}

/** How `acquire` and `remove` treat a session that another holder seems to hold. */
export interface TakeOver {
  /**
   * Take the session (or remove it) even from a holder still taken as alive: a process on another
   * host, which this machine cannot check, or a live lease. Only for a holder known to be gone:
   * its writes are refused from then on, but a run it still has goes on. Default false.
   */
  force?: boolean;
  /** With `force`: told who held it ("process 4242 on build-7"), before it is taken over. */
  onTakeOver?: (holder: string) => void;
}

export type StoreErrorCode =
  /** Another live process holds the session. */
  | "session_busy"
  /** The session id does not match `SESSION_ID_PATTERN`. */
  | "invalid_session_id"
  /** The file is not a database, or not an agentloop one. */
  | "corrupt_store"
  /** The database was written by a newer agentloop (its schema version is higher). */
  | "newer_schema"
  /** The store cannot be written (read-only file or folder, disk full). */
  | "store_unwritable"
  /** A handle used after `release()`, or the store after `close()`. */
  | "closed"
  /** Anything else the database reported. */
  | "store_error";

/** The one error every store rejects with; `message` is one line naming the problem and the fix. */
export class StoreError extends Error {
  override readonly name = "StoreError";
  /** `session_busy`: who holds the session, as a person reads it ("process 4242 on build-7"), when known. */
  readonly holder?: string;
  constructor(
    readonly code: StoreErrorCode,
    message: string,
    options?: { cause?: unknown; holder?: string },
  ) {
    super(message, options);
    if (options?.holder !== undefined) this.holder = options.holder;
  }
}
