// The SQLite file's schema and its migrations. The header's `application_id` marks the file as
// ours; `user_version` is the schema version. Opening checks both before writing anything, so a
// foreign, corrupt or newer file is never touched.
import type { DatabaseSync } from "node:sqlite";
import { StoreError } from "./types.js";

/** "AgLp": the SQLite header's application id of an agentloop database. */
const APPLICATION_ID = 0x41674c70;

/** Migration N (1-based) brings the schema from version N-1 to N. Never edit one that has shipped. */
const MIGRATIONS: readonly string[] = [
  `CREATE TABLE sessions (
     id TEXT PRIMARY KEY,
     created_at REAL NOT NULL,
     updated_at REAL NOT NULL,
     message_count INTEGER NOT NULL DEFAULT 0,
     last_run_id TEXT,
     holder TEXT
   );
   CREATE TABLE messages (
     session_id TEXT NOT NULL,
     seq INTEGER NOT NULL,
     message TEXT NOT NULL,
     PRIMARY KEY (session_id, seq)
   );
   CREATE TABLE runs (
     run_id TEXT PRIMARY KEY,
     session_id TEXT NOT NULL,
     status TEXT NOT NULL,
     stop_reason TEXT,
     state TEXT NOT NULL,
     created_at REAL NOT NULL,
     updated_at REAL NOT NULL
   );
   CREATE INDEX runs_by_session ON runs (session_id);`,
];

const SCHEMA_VERSION = MIGRATIONS.length;

interface Header {
  applicationId: number;
  version: number;
  tables: number;
}

function header(db: DatabaseSync): Header {
  const pragma = (name: string) => Number(Object.values(db.prepare(`PRAGMA ${name}`).get() ?? {})[0] ?? 0);
  const tables = db.prepare("SELECT count(*) AS n FROM sqlite_schema").get();
  return {
    applicationId: pragma("application_id"),
    version: pragma("user_version"),
    tables: Number(tables?.n),
  };
}

/** Rejects a file that is not ours (or is newer); true when migrations are due. */
function check(path: string, { applicationId, version, tables }: Header): boolean {
  if (applicationId !== APPLICATION_ID && (applicationId !== 0 || tables > 0))
    throw new StoreError(
      "corrupt_store",
      `${path} is not an agentloop database: move it away or set AGENTLOOP_DB to another file`,
    );
  if (version > SCHEMA_VERSION)
    throw new StoreError(
      "newer_schema",
      `${path} was written by a newer agentloop (schema ${version}; this one knows ${SCHEMA_VERSION}): upgrade agentloop`,
    );
  return version < SCHEMA_VERSION;
}

/** Rejects a file that is not ours, is newer, or needs a migration (which a reader cannot run). */
export function checkReadable(db: DatabaseSync, path: string): void {
  const now = header(db);
  if (!check(path, now)) return;
  throw new StoreError(
    "store_unwritable",
    `${path} needs an upgrade to this agentloop's schema (${now.version} to ${SCHEMA_VERSION}), and this process may not write it: run agentloop once where it may (any command with --session), or set AGENTLOOP_DB to another file`,
  );
}

/**
 * Brings the file to `SCHEMA_VERSION`, in WAL mode. Safe when several processes open a new file
 * at once: the migration runs in a write transaction and re-reads the version inside it.
 */
export function migrate(db: DatabaseSync, path: string, busyTimeoutMs: number): void {
  const due = check(path, header(db));
  walMode(db, Date.now() + busyTimeoutMs);
  if (!due) return;
  transaction(db, () => {
    const now = header(db);
    if (!check(path, now)) return;
    for (const sql of MIGRATIONS.slice(now.version)) db.exec(sql);
    db.exec(`PRAGMA application_id = ${APPLICATION_ID}; PRAGMA user_version = ${SCHEMA_VERSION}`);
  });
}

/**
 * Switches the file to WAL (persistent; a no-op without a write once it is). The switch needs the
 * file to itself and SQLite does not wait for that (the busy timeout does not apply), so while
 * another process is opening the same new file this retries until the deadline.
 */
function walMode(db: DatabaseSync, deadline: number): void {
  for (;;) {
    try {
      db.exec("PRAGMA journal_mode = WAL");
      return;
    } catch (error) {
      if ((error as { errcode?: number }).errcode !== SQLITE_BUSY || Date.now() > deadline) throw error;
      Atomics.wait(pause, 0, 0, 2);
    }
  }
}
const SQLITE_BUSY = 5;
const pause = new Int32Array(new SharedArrayBuffer(4));

/**
 * Runs `work` in one transaction: a write one by default (IMMEDIATE takes the write lock at
 * once, so waiting for it obeys busy_timeout), or a read snapshot (DEFERRED).
 */
export function transaction<T>(
  db: DatabaseSync,
  work: () => T,
  mode: "IMMEDIATE" | "DEFERRED" = "IMMEDIATE",
): T {
  db.exec(`BEGIN ${mode}`);
  try {
    const result = work();
    db.exec("COMMIT");
    return result;
  } catch (error) {
    try {
      db.exec("ROLLBACK");
    } catch {
      // SQLite already rolled back (it does on some I/O errors): nothing is left to undo.
    }
    throw error;
  }
}
