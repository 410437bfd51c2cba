import { closeSync, mkdirSync, openSync } from "node:fs";
import { dirname, resolve } from "node:path";
import type { DatabaseSync, StatementSync } from "node:sqlite";
import { pathToFileURL } from "node:url";
import { newHolder } from "./holder.js";
import {
  checkSessionId,
  clock,
  decodeMessage,
  encodeCheckpoint,
  filtered,
  handleReleased,
  runOfOtherSession,
  storeClosed,
} from "./shared.js";
import { liveHolder, type Row, runRecord, summary, takeOver } from "./sqlite-rows.js";
import { checkReadable, migrate, transaction } from "./sqlite-schema.js";
import { type SessionHandle, type SessionStore, type StoredSession, StoreError } from "./types.js";

export interface SqliteStoreOptions {
  /**
   * `normal` (default): a resolved checkpoint survives the process being killed (SIGKILL, a
   * crash) but the last ones may be lost if the machine loses power; WAL mode keeps the file
   * consistent either way. `full`: it survives a power loss too, at the cost of an fsync (about
   * a millisecond or more) per checkpoint.
   */
  synchronous?: "normal" | "full";
  /** How long a write waits for another process's transaction to finish. Default 5000 ms. */
  busyTimeoutMs?: number;
  /**
   * Only read an existing file (one this process may not write): nothing is created, switched or
   * migrated, and every write rejects `store_unwritable`. A file whose schema needs an upgrade is
   * refused with `store_unwritable` saying so. Default false.
   */
  readOnly?: boolean;
}

/**
 * A session store in one SQLite file (Node's built-in `node:sqlite`, Node 22.13 or newer), in
 * WAL mode. Creates the file and its folder on first use and brings its schema up to date;
 * rejects with `StoreError` (`corrupt_store`, `newer_schema`, `store_unwritable`) when the
 * file cannot be used, without changing it. `":memory:"` keeps everything in memory.
 *
 * Several processes may share the file: a session is held by one process at a time (its pid,
 * start time and host are recorded), and a holder whose process has died is recognised at once.
 * Calls are synchronous underneath (a transaction takes microseconds); a write waits at most
 * `busyTimeoutMs` for another process's transaction.
 */
export async function sqliteStore(path: string, options: SqliteStoreOptions = {}): Promise<SessionStore> {
  let sqlite: typeof import("node:sqlite");
  try {
    sqlite = await import("node:sqlite");
  } catch (error) {
    throw new StoreError(
      "store_error",
      `SQLite sessions need Node.js 22.13 or newer (this is ${process.version}): upgrade Node.js`,
      { cause: error },
    );
  }
  const file = path === ":memory:" ? path : resolve(path);
  const fail = (error: unknown) => toStoreError(error, file);
  let db: DatabaseSync | undefined;
  if (options.readOnly && file !== ":memory:") {
    try {
      db = openReadOnly(sqlite, file);
      db.exec(`PRAGMA busy_timeout = ${Math.max(0, Math.floor(options.busyTimeoutMs ?? 5000))}`);
      checkReadable(db, file);
      return open(db, fail);
    } catch (error) {
      db?.close();
      throw fail(error);
    }
  }
  try {
    if (file !== ":memory:") makeFolder(dirname(file), file);
    db = new sqlite.DatabaseSync(file);
    const busyTimeoutMs = Math.max(0, Math.floor(options.busyTimeoutMs ?? 5000));
    db.exec(`PRAGMA busy_timeout = ${busyTimeoutMs}`);
    migrate(db, file, busyTimeoutMs);
    db.exec(`PRAGMA synchronous = ${options.synchronous === "full" ? "FULL" : "NORMAL"}`);
    return open(db, fail);
  } catch (error) {
    db?.close();
    throw fail(error);
  }
}

/**
 * The file opened for reading. A WAL file needs its `-shm` index, which a reader that may not
 * write the folder cannot create when no writer has it open: then the file is read as immutable
 * (as it is while nobody writes it).
 */
function openReadOnly(sqlite: typeof import("node:sqlite"), file: string): DatabaseSync {
  const db = new sqlite.DatabaseSync(file, { readOnly: true });
  try {
    db.prepare("SELECT count(*) FROM sqlite_schema").get();
    return db;
  } catch (error) {
    db.close();
    const code = ((error as { errcode?: number }).errcode ?? 0) & 0xff;
    if (code !== SQLITE.READONLY && code !== SQLITE.CANTOPEN) throw error;
    const url = pathToFileURL(file);
    url.searchParams.set("immutable", "1");
    return new sqlite.DatabaseSync(url, { readOnly: true });
  }
}

/**
 * The file's folder (each folder made here 0700, an existing one left as it is) and the file
 * itself, made empty and 0600 when missing: SQLite gives its `-wal` and `-shm` files the mode of
 * the database file, so sessions are readable by their owner only. An existing file keeps its mode.
 */
function makeFolder(folder: string, file: string): void {
  try {
    mkdirSync(folder, { recursive: true, mode: 0o700 });
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code ?? String(error);
    throw new StoreError(
      "store_unwritable",
      `${file} cannot be created: its folder ${folder} cannot be made (${reason}): choose a writable path or set AGENTLOOP_DB to another file`,
      { cause: error },
    );
  }
  try {
    closeSync(openSync(file, "wx", 0o600));
  } catch {
    // There already (kept as it is), or not creatable: opening it says why in one line.
  }
}

const SUMMARY = `SELECT s.id, s.created_at, s.updated_at, s.message_count, s.last_run_id, s.holder,
  r.status, r.stop_reason FROM sessions s LEFT JOIN runs r ON r.run_id = s.last_run_id`;

/** The statements of a store, prepared once. */
function statements(db: DatabaseSync) {
  const sql = (text: string): StatementSync => db.prepare(text);
  return {
    summary: sql(`${SUMMARY} WHERE s.id = ?`),
    // No index on updated_at: keeping one would cost every checkpoint a page write; list() sorts.
    list: sql(`${SUMMARY} ORDER BY s.updated_at DESC, s.rowid DESC`),
    insertSession: sql("INSERT INTO sessions (id, created_at, updated_at, holder) VALUES (?, ?, ?, ?)"),
    setHolder: sql("UPDATE sessions SET holder = ? WHERE id = ?"),
    release: sql("UPDATE sessions SET holder = NULL WHERE id = ? AND holder = ?"),
    messages: sql("SELECT message FROM messages WHERE session_id = ? ORDER BY seq"),
    run: sql("SELECT * FROM runs WHERE run_id = ?"),
    // Only the holder can write: `holder = ?` makes a checkpoint of a handle that lost the session write nothing.
    touch: sql(
      `UPDATE sessions SET updated_at = ?, message_count = message_count + ?, last_run_id = coalesce(?, last_run_id)
       WHERE id = ? AND holder = ? RETURNING message_count`,
    ),
    insertMessage: sql("INSERT INTO messages (session_id, seq, message) VALUES (?, ?, ?)"),
    upsertRun: sql(
      `INSERT INTO runs (run_id, session_id, status, stop_reason, state, created_at, updated_at)
       VALUES (?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (run_id) DO UPDATE SET status = excluded.status, stop_reason = excluded.stop_reason,
         state = excluded.state, updated_at = excluded.updated_at
       WHERE runs.session_id = excluded.session_id`,
    ),
    sessionOfRun: sql("SELECT session_id FROM runs WHERE run_id = ?"),
    deleteMessages: sql("DELETE FROM messages WHERE session_id = ?"),
    deleteRuns: sql("DELETE FROM runs WHERE session_id = ?"),
    deleteSession: sql("DELETE FROM sessions WHERE id = ?"),
  };
}

type Statements = ReturnType<typeof statements>;

function stored(q: Statements, row: Row, held: boolean): StoredSession {
  const lastRun = typeof row.last_run_id === "string" ? runRecord(q.run.get(row.last_run_id)) : undefined;
  return {
    summary: summary(row, held),
    messages: q.messages.all(row.id as string).map((m) => decodeMessage(String(m.message))),
    ...(lastRun ? { lastRun } : {}),
  };
}

function open(db: DatabaseSync, fail: (error: unknown) => StoreError): SessionStore {
  const q = statements(db);
  const handles = new Set<{ sessionId: string; holder: string }>();
  let closed = false;

  /** Runs `work` against the open database; every failure becomes a `StoreError`. */
  async function use<T>(work: () => T): Promise<T> {
    if (closed) throw storeClosed();
    try {
      return work();
    } catch (error) {
      throw fail(error);
    }
  }

  function handleFor(sessionId: string, session: StoredSession, holder: string): SessionHandle {
    const held = { sessionId, holder };
    handles.add(held);
    let released = false;
    return {
      sessionId,
      session,
      checkpoint: (checkpoint) =>
        use(() => {
          if (released) throw handleReleased(sessionId);
          const { messages, run } = encodeCheckpoint(checkpoint);
          if (messages.length === 0 && run === undefined) return;
          transaction(db, () => {
            const now = clock();
            const row = q.touch.get(now, messages.length, run?.runId ?? null, sessionId, holder);
            if (row === undefined)
              throw new StoreError(
                "session_busy",
                `session '${sessionId}' is no longer held by this process: acquire it again before writing`,
              );
            let seq = Number(row.message_count) - messages.length;
            for (const message of messages) q.insertMessage.run(sessionId, seq++, message);
            if (run === undefined) return;
            const { runId, status, stopReason, state } = run;
            if (q.upsertRun.run(runId, sessionId, status, stopReason, state, now, now).changes === 0)
              throw runOfOtherSession(runId, String(q.sessionOfRun.get(runId)?.session_id));
          });
        }),
      async release() {
        if (released) return;
        released = true;
        handles.delete(held);
        if (!closed) await use(() => q.release.run(sessionId, holder));
      },
    };
  }

  return {
    acquire: (sessionId, options) =>
      use(() => {
        checkSessionId(sessionId);
        const holder = JSON.stringify(newHolder());
        const session = transaction(db, () => {
          const row = q.summary.get(sessionId);
          const live = row && liveHolder(row);
          if (live) takeOver(sessionId, live, options);
          if (row) {
            q.setHolder.run(holder, sessionId);
            return stored(q, row, false);
          }
          const now = clock();
          q.insertSession.run(sessionId, now, now, holder);
          const created = q.summary.get(sessionId) as Row;
          return { summary: summary(created, false), messages: [] };
        });
        return handleFor(sessionId, session, holder);
      }),

    read: (sessionId) =>
      use(() => {
        checkSessionId(sessionId);
        return transaction(
          db,
          () => {
            const row = q.summary.get(sessionId);
            return row && stored(q, row, liveHolder(row) !== undefined);
          },
          "DEFERRED",
        );
      }),

    list: (filter) =>
      use(() =>
        filtered(
          q.list.all().map((row) => summary(row, liveHolder(row) !== undefined)),
          filter,
        ),
      ),

    ping: () => use(() => undefined),

    sessionOfRun: (runId) =>
      use(() => {
        const row = q.sessionOfRun.get(runId);
        return row === undefined ? undefined : String(row.session_id);
      }),

    remove: (sessionId, options) =>
      use(() => {
        checkSessionId(sessionId);
        return transaction(db, () => {
          const row = q.summary.get(sessionId);
          if (row === undefined) return false;
          const live = liveHolder(row);
          if (live) takeOver(sessionId, live, options);
          q.deleteMessages.run(sessionId);
          q.deleteRuns.run(sessionId);
          q.deleteSession.run(sessionId);
          return true;
        });
      }),

    async close() {
      if (closed) return;
      try {
        for (const { sessionId, holder } of handles) q.release.run(sessionId, holder);
      } catch (error) {
        throw fail(error);
      } finally {
        closed = true;
        handles.clear();
        db.close();
      }
    },
  };
}

/** SQLite's primary result codes that this store tells apart. */
const SQLITE = {
  BUSY: 5,
  LOCKED: 6,
  READONLY: 8,
  IOERR: 10,
  CORRUPT: 11,
  FULL: 13,
  CANTOPEN: 14,
  NOTADB: 26,
};

function toStoreError(error: unknown, file: string): StoreError {
  if (error instanceof StoreError) return error;
  const { errcode, errstr, message } = error as { errcode?: number; errstr?: string; message?: string };
  const reason = errstr ?? message ?? String(error);
  const elsewhere = "or set AGENTLOOP_DB to another file";
  const make = (storeCode: StoreError["code"], text: string) =>
    new StoreError(storeCode, text, { cause: error });
  if (typeof errcode === "number") {
    switch (errcode & 0xff) {
      case SQLITE.NOTADB:
      case SQLITE.CORRUPT:
        return make("corrupt_store", `${file} is not an agentloop database: move it away ${elsewhere}`);
      case SQLITE.FULL:
        return make(
          "store_unwritable",
          `${file} cannot be written: the disk is full: free some space ${elsewhere}`,
        );
      case SQLITE.IOERR:
        return make(
          "store_unwritable",
          `${file} cannot be written (${reason}): check that its disk has space and accepts writes, ${elsewhere}`,
        );
      case SQLITE.READONLY:
      case SQLITE.CANTOPEN:
        return make(
          "store_unwritable",
          `${file} cannot be written (${reason}): make it and its folder writable ${elsewhere}`,
        );
      case SQLITE.BUSY:
      case SQLITE.LOCKED:
        return make("store_error", `${file} stayed locked by another process (${reason}): try again`);
    }
    return make("store_error", `${file}: ${reason}`);
  }
  return make("store_error", `${file}: ${reason}`);
}
