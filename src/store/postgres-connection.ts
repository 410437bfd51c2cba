// How the PostgreSQL store reaches its database: the URL read as libpq reads it (`sslmode`,
// `sslrootcert`, `connect_timeout`), the pool's time limits, and the driver's failures as one line.
import { readFileSync } from "node:fs";
import type { ConnectionOptions } from "node:tls";
import type { PoolConfig } from "pg";
import type { PostgresStoreOptions } from "./postgres-store.js";
import { StoreError } from "./types.js";

export type ConnectionLimits = Pick<
  PostgresStoreOptions,
  "maxConnections" | "connectTimeoutMs" | "queryTimeoutMs"
>;

/** A PostgreSQL URL made ready for the `pg` pool. */
export interface Connection {
  /** `host:port/database`, never the user or the password. */
  where: string;
  config: PoolConfig;
  /** `sslmode=prefer` (or `allow`): the same without TLS, for a server that has none. */
  plain?: PoolConfig;
  /** Any failure of the driver as a `StoreError` with one line naming host and port and the fix. */
  fail(error: unknown): StoreError;
}

const MODES = ["disable", "allow", "prefer", "require", "verify-ca", "verify-full"] as const;
type SslMode = (typeof MODES)[number];

const DEFAULT_CONNECT_MS = 5_000;
const DEFAULT_QUERY_MS = 10_000;
/** A transaction left open this long (its process frozen mid-write) is ended by the server, freeing its row locks. */
const IDLE_IN_TRANSACTION_MS = 30_000;

/**
 * Reads a `postgres://` URL. TLS follows libpq: `sslmode` `disable`, `allow`/`prefer` (TLS when
 * the server has it, without verifying it; the default), `require` (TLS without verifying the
 * server, or as `verify-ca` when `sslrootcert` is given), `verify-ca` (the certificate must be
 * signed by `sslrootcert`, or a CA Node trusts when it is absent or `system`), `verify-full` (and
 * name the host); `sslcert`/`sslkey` give a client certificate; `PGSSLMODE` applies when the URL
 * has no `sslmode`. Time limits: `connect_timeout` (seconds, 0 for none), `statement_timeout`
 * (ms), `idle_in_transaction_session_timeout` (ms).
 * @throws StoreError("store_error") with one line for a URL that cannot be used.
 */
export function readConnection(url: string, limits: ConnectionLimits = {}): Connection {
  const where = describeUrl(url);
  const parsed = new URL(url);
  const params = parsed.searchParams;
  const take = (name: string) => {
    const value = params.get(name) ?? undefined;
    params.delete(name);
    return value;
  };
  const mode = sslMode(take("sslmode"), take("ssl"));
  const files = { root: take("sslrootcert"), cert: take("sslcert"), key: take("sslkey") };
  const negotiation = take("sslnegotiation");
  take("uselibpqcompat"); // libpq's meaning is the only one here
  const connectMs = seconds(
    take("connect_timeout") ?? process.env.PGCONNECT_TIMEOUT,
    limits.connectTimeoutMs,
  );
  const queryMs = millis(
    "statement_timeout",
    take("statement_timeout"),
    limits.queryTimeoutMs ?? DEFAULT_QUERY_MS,
  );
  const idleMs = millis(
    "idle_in_transaction_session_timeout",
    take("idle_in_transaction_session_timeout"),
    IDLE_IN_TRANSACTION_MS,
  );
  const ssl = tlsOptions(mode, files);
  if (negotiation !== undefined && negotiation !== "postgres" && negotiation !== "direct")
    throw urlError(
      `sslnegotiation ${JSON.stringify(negotiation.slice(0, 20))} is not one: use postgres or direct`,
    );
  const config: PoolConfig = {
    connectionString: parsed.toString(),
    max: limits.maxConnections ?? 10,
    ssl,
    ...(negotiation !== undefined && { sslnegotiation: negotiation }),
    ...(connectMs > 0 && { connectionTimeoutMillis: connectMs }),
    ...(queryMs > 0 && { query_timeout: queryMs, statement_timeout: queryMs }),
    ...(idleMs > 0 && { idle_in_transaction_session_timeout: idleMs }),
    // A peer that vanished without closing (a machine gone, a partition) is noticed on idle connections too.
    keepAlive: true,
    keepAliveInitialDelayMillis: 10_000,
    application_name: "agentloop",
  };
  const fallback = mode === "prefer" || mode === "allow";
  return {
    where,
    config,
    ...(fallback && { plain: { ...config, ssl: false } }),
    fail: (error) => toStoreError(error, where, { mode, connectMs, queryMs }),
  };
}

/** `host:port/database` of a URL, never its password. */
function describeUrl(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch (error) {
    throw new StoreError(
      "store_error",
      "the PostgreSQL URL is not a URL: use postgres://user:password@host:port/database",
      { cause: error },
    );
  }
  if (parsed.protocol !== "postgres:" && parsed.protocol !== "postgresql:")
    throw new StoreError(
      "store_error",
      `the PostgreSQL URL starts with ${parsed.protocol}: use postgres://user:password@host:port/database`,
    );
  return `${parsed.hostname || "localhost"}:${parsed.port || "5432"}${parsed.pathname === "/" ? "" : parsed.pathname}`;
}

const urlError = (message: string) => new StoreError("store_error", `the PostgreSQL URL's ${message}`);

/** `ssl=` and `sslmode=no-verify`: the pg driver's own spellings, in libpq's terms. */
const PG_SPELLINGS: Record<string, string> = {
  true: "verify-full",
  "1": "verify-full",
  false: "disable",
  "0": "disable",
  "no-verify": "require",
};

function sslMode(sslmode: string | undefined, ssl: string | undefined): SslMode {
  const given =
    sslmode ?? (ssl === undefined ? undefined : `${ssl}`) ?? (process.env.PGSSLMODE?.trim() || "prefer");
  const mode = PG_SPELLINGS[given] ?? given;
  if ((MODES as readonly string[]).includes(mode)) return mode as SslMode;
  throw urlError(
    `sslmode ${JSON.stringify(given.slice(0, 40))} is not one: use disable, prefer, require, verify-ca or verify-full`,
  );
}

function tlsOptions(
  mode: SslMode,
  files: { root: string | undefined; cert: string | undefined; key: string | undefined },
): false | ConnectionOptions {
  if (mode === "disable") return false;
  const read = (name: string, path: string, what: string) => {
    try {
      return readFileSync(path, "utf8");
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? "unreadable";
      throw urlError(`${name} ${path} cannot be read (${code}): give the path of ${what}`);
    }
  };
  const client = {
    ...(files.cert !== undefined && { cert: read("sslcert", files.cert, "the client certificate (PEM)") }),
    ...(files.key !== undefined && { key: read("sslkey", files.key, "the client certificate's key (PEM)") }),
  };
  // `system` (as in libpq 16): the CAs Node trusts, which is also what verifying without sslrootcert uses.
  const root =
    files.root === undefined || files.root === "system"
      ? undefined
      : read("sslrootcert", files.root, "the PEM file of the CA that signed the server's certificate");
  const ca = root === undefined ? {} : { ca: root };
  const anyName = { checkServerIdentity: () => undefined };
  switch (mode) {
    case "allow":
    case "prefer":
    case "require":
      // Encrypted, not verified; with a root certificate, as verify-ca (libpq does the same).
      return root === undefined ? { ...client, rejectUnauthorized: false } : { ...client, ...ca, ...anyName };
    case "verify-ca":
      return { ...client, ...ca, ...anyName };
    case "verify-full":
      return { ...client, ...ca };
  }
}

/** Whole seconds (libpq's `connect_timeout`; 0 waits forever), as milliseconds. */
function seconds(text: string | undefined, fallback: number | undefined): number {
  if (text === undefined) return fallback ?? DEFAULT_CONNECT_MS;
  const n = Number(text);
  if (text.trim() === "" || !Number.isInteger(n) || n < 0 || n > 3600)
    throw urlError(
      `connect_timeout ${JSON.stringify(text.slice(0, 20))} is not a time: give whole seconds from 0 (no limit) to 3600`,
    );
  return n * 1000;
}

function millis(name: string, text: string | undefined, fallback: number): number {
  if (text === undefined) return fallback;
  const n = Number(text);
  if (text.trim() === "" || !Number.isInteger(n) || n < 0 || n > 2 ** 31 - 1)
    throw urlError(
      `${name} ${JSON.stringify(text.slice(0, 20))} is not a time: give milliseconds (0 for no limit)`,
    );
  return n;
}

/** A failure of the connection (or a server restarting, or one that did not answer in time), which a new connection may not have. */
export function transient(error: unknown): boolean {
  const cause = error instanceof StoreError ? error.cause : error;
  const { code, message } = (cause ?? {}) as { code?: string; message?: string };
  if (code && (UNREACHABLE.has(code) || code.startsWith("08") || code.startsWith("57P"))) return true;
  if (code === "57014" || code === "25P03") return true; // statement timeout, idle-in-transaction timeout
  return TIMEOUT.test(String(message)) || /Connection terminated/i.test(String(message));
}

/** The driver's words for a time limit that struck (connecting, waiting for a pooled connection, a query). */
const TIMEOUT =
  /timeout exceeded when trying to connect|connection timeout|timeout expired|Query read timeout/i;

/** Node's errors for a server that cannot be reached. */
const UNREACHABLE = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ECONNRESET",
]);

function toStoreError(
  error: unknown,
  where: string,
  how: { mode: SslMode; connectMs: number; queryMs: number },
): StoreError {
  if (error instanceof StoreError) return error;
  const { code, message } = (error ?? {}) as { code?: string; message?: string };
  const reason = String(message ?? error)
    .replace(/\s+/g, " ")
    .trim();
  const make = (text: string) => new StoreError("store_error", text, { cause: error });
  const host = where.replace(/\/.*$/, "");
  const at = `PostgreSQL at ${host}`;
  if (code && UNREACHABLE.has(code))
    return make(`cannot reach ${at}: ${reason}: check that it runs and the URL's host and port`);
  if (code === "28P01" || code === "28000")
    return make(`${at} refused the login (${reason}): check the user and password in the URL`);
  if (code === "3D000") return make(`${at}: ${reason}: create it or fix the URL`);
  if (/does not support SSL/i.test(reason))
    return make(
      `${at} does not support SSL, which sslmode=${how.mode} requires: turn ssl on in the server, or use sslmode=prefer or disable`,
    );
  if (code === "ERR_TLS_CERT_ALTNAME_INVALID")
    return make(
      `${at}: its certificate is not for this host (${reason}; sslmode=verify-full): connect by a name the certificate holds, or use sslmode=verify-ca`,
    );
  if (code && /CERT|SELF_SIGNED|UNABLE_TO_(GET|VERIFY)/.test(code))
    return make(
      // Node's own advice after a ";" (run with --use-system-ca) is not the fix here.
      `${at}: its certificate was refused (${reason.split(";")[0]}; sslmode=${how.mode}): give the CA that signed it with sslrootcert=<file>, or use sslmode=require to encrypt without verifying the server`,
    );
  if (/timeout exceeded when trying to connect|connection timeout|timeout expired/i.test(reason))
    return make(
      `${at} did not answer within ${how.connectMs / 1000} s (connect_timeout): check that it runs and accepts connections, or raise ?connect_timeout= (seconds) in the URL`,
    );
  if (/Query read timeout/i.test(reason) || code === "57014")
    return make(
      `${at} did not answer a query within ${how.queryMs / 1000} s: check that the server is up and not overloaded, or raise ?statement_timeout= (ms) in the URL`,
    );
  if (reason.includes("Connection terminated") || code === "25P03")
    return make(`lost the connection to ${at} (${reason}): check the server and try again`);
  return make(`PostgreSQL at ${where}: ${reason}`);
}
