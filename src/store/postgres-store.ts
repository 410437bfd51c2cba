import type { Pool, PoolClient, QueryConfig } from "pg";
import { describeHolder, newHolder, parseHolder } from "./holder.js";
import { LEASE, writeCheckpoint } from "./postgres-checkpoint.js";
import { readConnection, transient } from "./postgres-connection.js";
import { busy, type Row, SUMMARY, stored, summary } from "./postgres-rows.js";
import { migrate } from "./postgres-schema.js";
import { checkSessionId, clock, encodeCheckpoint, filtered, handleReleased, storeClosed } from "./shared.js";
import {
  type SessionHandle,
  type SessionStore,
  type StoredSession,
  StoreError,
  type TakeOver,
} from "./types.js";

/** Declared here, apart from the driver's types: a program using the store needs no `@types/pg`. */
export interface PostgresStoreOptions {
  /** Connections in the pool. Default 10. */
  maxConnections?: number;
  /** How long to wait for a connection (TCP, TLS and login). Default 5000 ms; `?connect_timeout=` (seconds) wins. */
  connectTimeoutMs?: number;
  /** How long one statement may take before it is given up. Default 10000 ms; `?statement_timeout=` (ms) wins. */
  queryTimeoutMs?: number;
  /**
   * How long a session stays held by a holder that stopped renewing it (its process died or lost
   * the database); the handle renews it every third of this while held. A holder with no renewal
   * answered gives the session up by its own clock a fifth of this (at most 5 s) before it runs
   * out: `lost` aborts and nothing more is written. 100 ms to 1 day; default 30000 ms.
   */
  leaseMs?: number;
}

/**
 * A session store in a PostgreSQL database (the `pg` driver, loaded only when this is called),
 * for several processes or machines sharing sessions. Creates its tables (`agentloop_*`) on
 * start, safely when several processes start at once; rejects `newer_schema` for a database of
 * a newer agentloop. A session is held through a lease in its row that the handle renews; a
 * holder that stops renewing loses it after `leaseMs`. The URL is read as libpq reads it
 * (`sslmode`, `sslrootcert`, `connect_timeout`: see `readConnection`); every connection and
 * statement has a time limit, so a database that stops answering is a `StoreError`, not a hang.
 */
export async function postgresStore(url: string, options: PostgresStoreOptions = {}): Promise<SessionStore> {
  const leaseMs = options.leaseMs ?? 30_000;
  if (!(leaseMs >= 100 && leaseMs <= 86_400_000))
    throw new StoreError(
      "store_error",
      `leaseMs ${leaseMs} is out of range: give 100 ms to 1 day (86400000 ms)`,
    );
  const connection = readConnection(url, options);
  const pg = await import("pg").then((m) => m.default ?? m);
  // sslmode=prefer: TLS first, and plain connections when the server answers it has no TLS.
  for (const config of [connection.config, connection.plain]) {
    if (config === undefined) continue;
    const pool = new pg.Pool(config);
    // An idle connection that breaks is dropped by the pool; the next query reports the problem.
    pool.on("error", () => undefined);
    try {
      const client = await pool.connect();
      try {
        await migrate(client, connection.where);
      } finally {
        client.release();
      }
      return open(pool, Math.floor(leaseMs), connection.fail);
    } catch (error) {
      await pool.end().catch(() => undefined);
      const noTls = /does not support SSL/i.test(String((error as Error | undefined)?.message));
      if (!(noTls && config !== connection.plain && connection.plain)) throw connection.fail(error);
    }
  }
  throw new StoreError("store_error", `PostgreSQL at ${connection.where}: no way to connect`);
}

function open(pool: Pool, leaseMs: number, fail: (error: unknown) => StoreError): SessionStore {
  const handles = new Map<string, { sessionId: string; stop: () => void }>();
  /**
   * Holders of this store whose release failed (the database was out), by session: released here,
   * so nobody uses them, and this store takes such a session over at once instead of waiting for
   * the lease to run out.
   */
  const abandoned = new Map<string, string>();
  let closed = false;

  /** Runs `work` in one transaction on one connection; every failure becomes a `StoreError`. */
  async function transaction<T>(work: (client: PoolClient) => Promise<T>, readOnly = false): Promise<T> {
    if (closed) throw storeClosed();
    let client: PoolClient | undefined;
    let broken = false;
    try {
      client = await pool.connect();
      await client.query(readOnly ? "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY" : "BEGIN");
      const result = await work(client);
      await client.query("COMMIT");
      return result;
    } catch (error) {
      // A broken or silent connection is dropped (the server rolls back); a ROLLBACK on it would wait too.
      broken = transient(error);
      if (!broken) await client?.query("ROLLBACK").catch(() => undefined);
      throw fail(error);
    } finally {
      client?.release(broken);
    }
  }

  async function query<T>(text: string, values: unknown[]): Promise<T[]> {
    if (closed) throw storeClosed();
    try {
      return (await pool.query(text, values)).rows as T[];
    } catch (error) {
      throw fail(error);
    }
  }

  function handleFor(
    sessionId: string,
    session: StoredSession,
    holder: string,
    sentAt: number,
  ): SessionHandle {
    let released = false;
    /** Messages in the log: this handle is the only writer while it holds the session. */
    let count = session.messages.length;
    const lost = new AbortController();
    const loseIt = (why: string) => {
      if (released || lost.signal.aborted) return;
      clearTimeout(fence);
      lost.abort(new StoreError("session_busy", `session '${sessionId}' was lost: ${why}`));
      handles.get(holder)?.stop();
    };
    const takenOver = () => loseIt("this process could not renew its lease in time and another took it over");
    // Fencing by this process's own monotonic clock: the lease in the database runs at least
    // `leaseMs` from when its last extension was sent (the database reads its clock after that), so
    // a holder that has had no extension answered by `sent + leaseMs - margin` gives the session up
    // there, whether or not the database ever answers (a partition that leaves TCP hanging), and its
    // run stops before another process can take the session over.
    let heldUntil = sentAt + leaseMs - fenceMargin(leaseMs);
    const extended = (at: number) => {
      heldUntil = Math.max(heldUntil, at + leaseMs - fenceMargin(leaseMs));
    };
    const checkFence = () => {
      const left = heldUntil - performance.now();
      if (left > 0) fence = setTimeout(checkFence, left).unref();
      else
        loseIt(
          "this process could not renew its lease in time (it was cut off from the store, or paused), so it gave the session up before the lease ran out",
        );
    };
    let fence = setTimeout(checkFence, heldUntil - performance.now()).unref();
    // Renews the lease while held, each renewal on a connection of its own (the pool never shares
    // one in use) with at most one tick to answer: one that does not is given up, its connection
    // dropped, before the next, which then goes out on another connection, never behind it.
    // A renewal that finds the session taken over aborts `lost`.
    const every = Math.max(1, Math.floor(leaseMs / 3));
    let renewing = false;
    const renew = setInterval(() => {
      if (renewing) return;
      renewing = true;
      const at = performance.now();
      pool
        .query({
          text: `UPDATE agentloop_sessions SET lease_until = ${LEASE} WHERE id = $1 AND holder = $2`,
          values: [sessionId, holder, leaseMs],
          query_timeout: Math.min(every, 10_000),
        } as QueryConfig)
        .then((result) => {
          if (result.rowCount === 0) takenOver();
          else extended(at);
        })
        .catch(() => undefined)
        .finally(() => {
          renewing = false;
        });
    }, every);
    renew.unref();
    handles.set(holder, {
      sessionId,
      stop: () => {
        clearInterval(renew);
        clearTimeout(fence);
      },
    });

    /** One attempt: the log grows from `count` to `count + n` and the run is upserted, or nothing. */
    const write = (messages: string[], run: ReturnType<typeof encodeCheckpoint>["run"], retry: boolean) =>
      transaction(async (client) => {
        await writeCheckpoint(client, { sessionId, holder, leaseMs, count, takenOver }, messages, run, retry);
        // Given up meanwhile: this transaction rolls back, so nothing is written after the loss.
        if (lost.signal.aborted) throw lost.signal.reason;
      });
    return {
      sessionId,
      session,
      lost: lost.signal,
      async checkpoint(checkpoint) {
        if (closed) throw storeClosed();
        if (released) throw handleReleased(sessionId);
        if (lost.signal.aborted) throw lost.signal.reason;
        const { messages, run } = encodeCheckpoint(checkpoint);
        if (messages.length === 0 && run === undefined) return;
        const sent = performance.now();
        // A connection that breaks is retried (with a fresh one) while the lease still holds; a
        // retry never appends twice, since the write is conditional on the log's length.
        const deadline = Date.now() + Math.min(leaseMs / 2, 10_000);
        for (let attempt = 0; ; attempt++) {
          try {
            await write(messages, run, attempt > 0);
            break;
          } catch (error) {
            const over = closed || released || lost.signal.aborted;
            if (!transient(error) || Date.now() + backoff(attempt) > deadline || over) throw error;
            await sleep(backoff(attempt));
          }
        }
        extended(sent);
        count += messages.length;
      },
      async release() {
        if (released) return;
        released = true;
        handles.get(holder)?.stop();
        handles.delete(holder);
        if (closed) return;
        abandoned.set(sessionId, holder);
        await query(
          "UPDATE agentloop_sessions SET holder = NULL, lease_until = NULL WHERE id = $1 AND holder = $2",
          [sessionId, holder],
        );
        if (abandoned.get(sessionId) === holder) abandoned.delete(sessionId);
      },
    };
  }

  return {
    async acquire(sessionId, options) {
      if (closed) throw storeClosed();
      checkSessionId(sessionId);
      const holder = JSON.stringify(newHolder());
      const sent = performance.now();
      const session = await transaction(async (client) => {
        const now = clock();
        await client.query(
          `INSERT INTO agentloop_sessions (id, created_at, updated_at) VALUES ($1, $2, $2)
           ON CONFLICT (id) DO NOTHING`,
          [sessionId, now],
        );
        const row = (await client.query<Row>(`${SUMMARY} WHERE s.id = $1 FOR UPDATE OF s`, [sessionId]))
          .rows[0];
        if (row === undefined)
          throw new StoreError("store_error", `session '${sessionId}' vanished while acquired: try again`);
        if (row.held && row.holder !== abandoned.get(sessionId)) takeOver(sessionId, row, options);
        await client.query(
          `UPDATE agentloop_sessions SET holder = $2, lease_until = ${LEASE} WHERE id = $1`,
          [sessionId, holder, leaseMs],
        );
        return stored(client, row, false);
      });
      abandoned.delete(sessionId);
      return handleFor(sessionId, session, holder, sent);
    },

    async read(sessionId) {
      if (closed) throw storeClosed();
      checkSessionId(sessionId);
      return transaction(async (client) => {
        const row = (await client.query<Row>(`${SUMMARY} WHERE s.id = $1`, [sessionId])).rows[0];
        return row && stored(client, row, row.held);
      }, true);
    },

    async list(filter) {
      // Interrupted runs are what replicas look for to resume: selected in the database.
      const where =
        filter?.status === "interrupted"
          ? " WHERE r.status = 'running' AND (s.holder IS NULL OR s.lease_until <= now())"
          : "";
      const limit = filter?.limit === undefined ? "" : ` LIMIT ${Math.max(0, Math.floor(filter.limit))}`;
      const order = filter?.oldestFirst ? "ASC" : "DESC";
      const rows = await query<Row>(
        `${SUMMARY}${where} ORDER BY s.updated_at ${order}, s.id${where ? limit : ""}`,
        [],
      );
      // Already in the order asked for: `filtered` must not reverse it again.
      return filtered(
        rows.map((row) => summary(row, row.held)),
        filter && { ...filter, oldestFirst: false },
      );
    },

    async ping() {
      await query("SELECT 1", []);
    },

    async sessionOfRun(runId) {
      const rows = await query<{ session_id: string }>(
        "SELECT session_id FROM agentloop_runs WHERE run_id = $1",
        [runId],
      );
      return rows[0]?.session_id;
    },

    async remove(sessionId, options) {
      if (closed) throw storeClosed();
      checkSessionId(sessionId);
      return transaction(async (client) => {
        const row = (await client.query<Row>(`${SUMMARY} WHERE s.id = $1 FOR UPDATE OF s`, [sessionId]))
          .rows[0];
        if (row === undefined) return false;
        if (row.held) takeOver(sessionId, row, options);
        await client.query("DELETE FROM agentloop_messages WHERE session_id = $1", [sessionId]);
        await client.query("DELETE FROM agentloop_runs WHERE session_id = $1", [sessionId]);
        await client.query("DELETE FROM agentloop_sessions WHERE id = $1", [sessionId]);
        return true;
      });
    },

    async close() {
      if (closed) return;
      for (const { stop } of handles.values()) stop();
      const held = [...handles].map(([holder, { sessionId }]) => [sessionId, holder]);
      handles.clear();
      held.push(...abandoned);
      abandoned.clear();
      try {
        for (const [sessionId, holder] of held)
          await pool.query(
            "UPDATE agentloop_sessions SET holder = NULL, lease_until = NULL WHERE id = $1 AND holder = $2",
            [sessionId, holder],
          );
      } catch (error) {
        throw fail(error);
      } finally {
        closed = true;
        await pool.end().catch(() => undefined);
      }
    },
  };
}

/**
 * How long before its lease runs out (by its own clock) a holder with no renewal answered gives the
 * session up: time for its run to stop, and for clocks that run at slightly different rates.
 */
const fenceMargin = (leaseMs: number) => Math.min(leaseMs / 5, 5_000);
/** A held session is refused, or taken over when forced (the caller told who held it). */
function takeOver(sessionId: string, row: Row, options: TakeOver | undefined): void {
  if (!options?.force) throw busy(sessionId, row);
  const holder = row.holder === null ? undefined : parseHolder(row.holder);
  options.onTakeOver?.(holder ? describeHolder(holder) : "another process");
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const backoff = (attempt: number) => Math.min(100 * 2 ** attempt, 2_000);
