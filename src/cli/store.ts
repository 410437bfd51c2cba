import { resolve } from "node:path";
import { AgentloopError } from "../core/errors.js";
import type { SessionStore } from "../store/types.js";
import type { Settings } from "./config.js";

/** Whether a store location is a PostgreSQL URL rather than a SQLite file path. */
export const isPostgresUrl = (location: string): boolean => /^postgres(ql)?:\/\//i.test(location);

/** The store's place as it may be printed: a file path, or `postgres://host:port/database` (no user, no password). */
export function describeStore(location: string): string {
  if (!isPostgresUrl(location)) return resolve(location);
  try {
    const url = new URL(location);
    return `postgres://${url.hostname || "localhost"}:${url.port || "5432"}${url.pathname === "/" ? "" : url.pathname}`;
  } catch {
    return "a PostgreSQL URL";
  }
}

export interface StoreOptions {
  /** PostgreSQL: how long a session stays held by a process that stopped renewing its lease (default `AGENTLOOP_DB_LEASE` seconds, else 30 s). */
  leaseMs?: number;
  /** SQLite: for a command that only reads, a file this process may not write is opened read-only. */
  reading?: boolean;
}

/**
 * Opens the session store of the settings (`AGENTLOOP_DB`, config `"db"`, or
 * `.agentloop/agentloop.db` under the working directory): a SQLite file, created on first use,
 * or a PostgreSQL database (`postgres://`), whose tables are created on first use. Only called
 * when something is to be stored: nothing is opened for a run without `--session`.
 * @throws AgentloopError("config") with the store's one-line reason (corrupt or foreign file,
 * newer schema, unwritable place, unreachable server), naming where the location came from.
 */
export async function openStore(
  settings: Pick<Settings, "db">,
  options: StoreOptions = {},
): Promise<SessionStore> {
  const { location, from } = settings.db;
  const { sqliteStore, postgresStore, StoreError } = await import("../store/index.js");
  try {
    if (isPostgresUrl(location)) {
      const leaseMs = options.leaseMs ?? leaseFromEnv();
      return await postgresStore(location, leaseMs === undefined ? {} : { leaseMs });
    }
    return await sqliteStore(resolve(location)).catch((error: unknown) => {
      const unwritable = error instanceof StoreError && error.code === "store_unwritable";
      if (!(unwritable && options.reading)) throw error;
      return sqliteStore(resolve(location), { readOnly: true });
    });
  } catch (error) {
    if (error instanceof StoreError) throw new AgentloopError("config", `${error.message} (${from})`);
    throw error;
  }
}

/** `AGENTLOOP_DB_LEASE` (seconds), the lease of every command on a PostgreSQL store; `serve --lease` wins over it. */
export function leaseFromEnv(): number | undefined {
  const text = process.env.AGENTLOOP_DB_LEASE?.trim();
  if (!text) return undefined;
  const seconds = Number(text);
  if (!Number.isFinite(seconds) || seconds < 1 || seconds > 3600)
    throw new AgentloopError(
      "config",
      `AGENTLOOP_DB_LEASE is '${text.slice(0, 40)}': give the lease in seconds, from 1 to 3600 (default 30).`,
    );
  return seconds * 1000;
}
