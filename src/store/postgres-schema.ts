// The PostgreSQL schema and its migrations. The version lives in `agentloop_schema`; every
// start migrates under a transaction-scoped advisory lock, so replicas starting at once apply
// each migration exactly once, and a database from a newer agentloop is refused untouched.
import type { PoolClient } from "pg";
import { StoreError } from "./types.js";

/** "AgLp": the advisory lock key that serialises migrations. */
const MIGRATION_LOCK = 0x41674c70;

/** Migration N (1-based) brings the schema from version N-1 to N. Never edit one that has shipped. */
const MIGRATIONS: readonly string[] = [
  `CREATE TABLE agentloop_sessions (
     id TEXT PRIMARY KEY,
     created_at DOUBLE PRECISION NOT NULL,
     updated_at DOUBLE PRECISION NOT NULL,
     message_count INTEGER NOT NULL DEFAULT 0,
     last_run_id TEXT,
     holder TEXT,
     lease_until TIMESTAMPTZ
   );
   CREATE TABLE agentloop_messages (
     session_id TEXT NOT NULL,
     seq INTEGER NOT NULL,
     message TEXT NOT NULL,
     PRIMARY KEY (session_id, seq)
   );
   CREATE TABLE agentloop_runs (
     run_id TEXT PRIMARY KEY,
     session_id TEXT NOT NULL,
     status TEXT NOT NULL,
     stop_reason TEXT,
     state TEXT NOT NULL,
     created_at DOUBLE PRECISION NOT NULL,
     updated_at DOUBLE PRECISION NOT NULL
   );
   CREATE INDEX agentloop_runs_by_session ON agentloop_runs (session_id);`,
];

const SCHEMA_VERSION = MIGRATIONS.length;

/** Brings the database to `SCHEMA_VERSION`; `where` names it in messages (host:port/database). */
export async function migrate(client: PoolClient, where: string): Promise<void> {
  await client.query("BEGIN");
  try {
    await client.query("SELECT pg_advisory_xact_lock($1)", [MIGRATION_LOCK]);
    await client.query("CREATE TABLE IF NOT EXISTS agentloop_schema (version INTEGER NOT NULL)");
    const { rows } = await client.query<{ version: number | null }>(
      "SELECT max(version) AS version FROM agentloop_schema",
    );
    const version = rows[0]?.version ?? 0;
    if (version > SCHEMA_VERSION)
      throw new StoreError(
        "newer_schema",
        `the PostgreSQL database at ${where} was written by a newer agentloop (schema ${version}; this one knows ${SCHEMA_VERSION}): upgrade agentloop`,
      );
    for (const sql of MIGRATIONS.slice(version)) await client.query(sql);
    if (version < SCHEMA_VERSION) {
      await client.query("DELETE FROM agentloop_schema");
      await client.query("INSERT INTO agentloop_schema (version) VALUES ($1)", [SCHEMA_VERSION]);
    }
    await client.query("COMMIT");
  } catch (error) {
    await client.query("ROLLBACK").catch(() => undefined);
    throw error;
  }
}
