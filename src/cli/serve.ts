import type { IncomingMessage, Server, ServerResponse } from "node:http";
import { isIPv4, isIPv6 } from "node:net";
import { serve } from "@hono/node-server";
import { AgentloopError, errorMessage } from "../core/errors.js";
import { createApp } from "../server/app.js";
import { type ClientKey, clientKeysProblem, DEFAULT_OWNER } from "../server/owners.js";
import type { SessionStore } from "../store/types.js";
import { mcpSecrets, settingsFrom, setupAgent } from "./compose.js";
import type { CliFlags, Settings } from "./config.js";
import { cliElicitation } from "./elicitation.js";
import { interruptible } from "./interrupt.js";
import { describeStore, isPostgresUrl, leaseFromEnv, openStore } from "./store.js";

export interface ServeFlags extends CliFlags {
  /** Port to listen on; 0 picks a free one. Default 8787. */
  port?: number;
  /** Interface to bind. Default 127.0.0.1 (loopback only); 0.0.0.0 exposes the server. */
  host?: string;
  /** Comma-separated origins whose web pages may call the API (CORS), or `*`. */
  cors?: string;
  /** `false` (`--no-auth`): serve beyond loopback without `AGENTLOOP_API_KEY`, deliberately. */
  auth?: boolean;
  /** Seconds the requests in flight may take to finish after SIGTERM before they are cut. Default 10. */
  drainTimeout?: number;
  /** PostgreSQL store: seconds a session stays held by a replica that stopped renewing its lease. Default 30. */
  lease?: number;
  /** Resume the store's interrupted runs without waiting for a `/resume` request. */
  resumeOrphans?: boolean;
  /** `false` (`--no-store`): store no run, not even in the default `.agentloop/agentloop.db`. */
  store?: boolean;
  /** Serve the agent as an MCP server too, over Streamable HTTP at `/mcp` (SPEC section 14). */
  mcp?: boolean;
}

const DEFAULT_PORT = 8787;
const DEFAULT_HOST = "127.0.0.1";
const DEFAULT_DRAIN_SECONDS = 10;
/** After the runs are over, how long responses may take to reach their clients before connections are cut. */
const FLUSH_GRACE_MS = 2_000;

/** Whether `host` is a loopback name or address (localhost, 127.0.0.0/8, ::1). */
function isLoopback(host: string): boolean {
  const bare = host.replace(/^\[(.*)\]$/, "$1").toLowerCase();
  if (bare === "localhost") return true;
  if (isIPv4(bare)) return bare.startsWith("127.");
  return isIPv6(bare) && new URL(`http://[${bare}]`).hostname === "[::1]";
}

/**
 * `--host` as a socket binds it: an IPv6 address without the brackets a URL writes around it
 * (`[::1]` binds `::1`).
 * @throws AgentloopError("config") for brackets around something that is not an IPv6 address.
 */
function bindAddress(host: string): string {
  const inner = /^\[(.*)\]$/.exec(host)?.[1];
  if (inner === undefined) return host;
  if (isIPv6(inner)) return inner;
  throw new AgentloopError(
    "config",
    `--host ${host}: brackets hold an IPv6 address, e.g. [::1]; write a host name or IPv4 address without them.`,
  );
}

/** An address as a URL (and a `Host` header) writes it: IPv6 in brackets, canonical (`[::1]`), lower case. */
function urlHost(address: string): string {
  const host = isIPv6(address) ? `[${address}]` : address;
  try {
    return new URL(`http://${host}`).hostname;
  } catch {
    return host.toLowerCase();
  }
}

/** The `--cors` list as serialised origins (what browsers send), or a config error naming the bad entry. */
function parseCorsOrigins(value: string): string[] {
  return value
    .split(",")
    .map((entry) => entry.trim())
    .filter(Boolean)
    .map((entry) => {
      if (entry === "*") return entry;
      let origin = "null";
      try {
        origin = new URL(entry).origin;
      } catch {}
      if (origin === "null" || origin.length < entry.replace(/\/$/, "").length) {
        throw new AgentloopError(
          "config",
          `--cors: '${entry}' is not an origin: give scheme, host and port only, e.g. https://app.example.com or http://localhost:3000 (comma-separated, or *).`,
        );
      }
      return origin;
    });
}

/**
 * `agentloop serve`: the agent (built-in and MCP tools included) as an OpenAI-compatible model
 * named after the configured model id, on `--host` and `--port`. Every run is stored (SPEC
 * section 9) where `run --session` stores sessions (`AGENTLOOP_DB`, config `"db"`, else
 * `.agentloop/agentloop.db`), unless `--no-store`. `AGENTLOOP_API_KEY`, when set,
 * is required from clients; beyond loopback it must be set (or `--no-auth` given). On a loopback
 * host, requests for other host names are refused (DNS rebinding). One line per request goes to
 * stderr. SIGTERM or SIGINT drains: new requests get 503, answers in flight finish up to
 * `--drain-timeout` and are then cut; a second signal stops at once. Resolves to the exit code
 * (0) once the server has closed.
 * @throws AgentloopError("config") for bad settings or an address that cannot be bound.
 */
export async function serveCommand(flags: ServeFlags, version = "0.0.0"): Promise<number> {
  const host = bindAddress(flags.host ?? DEFAULT_HOST);
  const apiKey = process.env.AGENTLOOP_API_KEY?.trim() || undefined;
  const loopback = isLoopback(host);
  if (flags.auth === false && apiKey) {
    throw new AgentloopError(
      "config",
      "--no-auth contradicts AGENTLOOP_API_KEY, which is set: drop one of them.",
    );
  }
  const configured = await settingsFrom(flags);
  const keys = clientKeys(configured);
  if (flags.auth === false && keys.length > 0) {
    throw new AgentloopError(
      "config",
      `--no-auth contradicts "serve": {"keys"} in ${configured.configFile ?? "agentloop.json"}: drop one of them.`,
    );
  }
  if (!loopback && !apiKey && keys.length === 0 && flags.auth !== false) {
    throw new AgentloopError(
      "config",
      `--host ${host} lets other machines run the agent: set AGENTLOOP_API_KEY (clients send it as a Bearer token), or pass --no-auth to serve without one.`,
    );
  }
  const corsOrigins = flags.cors === undefined ? [] : parseCorsOrigins(flags.cors);
  const drainMs = (flags.drainTimeout ?? DEFAULT_DRAIN_SECONDS) * 1000;
  // Nobody can be asked: a server's request for input is declined unless the config says otherwise.
  const onElicitation = cliElicitation({
    mode: configured.elicitation,
    note: (line) => process.stderr.write(`${line}\n`),
    hint: `the server cannot ask anyone (set "elicitation": "accept-defaults" in ${configured.configFile ?? "agentloop.json"} to accept forms whose required fields have defaults)`,
  });
  // Ctrl+C while the MCP servers start (a sign-in in the browser included) gives up at once.
  const {
    settings,
    agent,
    close: closeAgent,
  } = await interruptible(
    (signal) => setupAgent(flags, { settings: configured, onElicitation, signal }),
    (made) => made.close(),
  );
  let store: SessionStore | undefined;
  try {
    store = await serverStore(settings, flags);
  } catch (error) {
    await closeAgent();
    throw error;
  }
  const leaseMs = flags.lease === undefined ? (leaseFromEnv() ?? 30_000) : flags.lease * 1000;
  const log = (line: string) => process.stderr.write(`agentloop: ${line}\n`);
  const mcp = flags.mcp
    ? (await import("./serve-mcp.js")).serveMcp(agent, version, storeOff(flags, settings), log)
    : undefined;
  const close = async () => {
    await mcp?.close();
    await closeAgent();
    await store?.close().catch(() => {});
  };
  const server = createApp({
    agents: { [settings.model]: agent },
    ...(store && { store }),
    ...(flags.resumeOrphans && { resumeOrphans: { everyMs: Math.min(5_000, Math.max(250, leaseMs / 3)) } }),
    ...(apiKey && { apiKey }),
    ...(keys.length > 0 && { keys }),
    ...(loopback && { allowedHosts: ["127.0.0.1", "localhost", "[::1]", urlHost(host)] }),
    corsOrigins,
    secrets: [
      settings.apiKey,
      process.env.OPENAI_API_KEY,
      process.env.ANTHROPIC_API_KEY,
      ...mcpSecrets(settings),
    ].filter((s): s is string => s !== undefined),
    log,
    ...(mcp && { mcp: mcp.handle }),
  });
  let http: Server;
  try {
    http = await listen(server.app.fetch, host, flags.port ?? DEFAULT_PORT);
  } catch (error) {
    await close();
    throw error;
  }
  const address = http.address();
  const port = typeof address === "object" && address ? address.port : flags.port;
  const origin = `http://${urlHost(host)}:${port}`;
  process.stderr.write(
    `agentloop: serving ${settings.model} on ${origin} (OpenAI-compatible: /v1/chat/completions, /v1/responses${mcp ? "; MCP: /mcp" : ""})\n`,
  );
  process.stderr.write(
    `agentloop: A2A agent card at ${origin}/.well-known/agent-card.json (JSON-RPC at /a2a)\n`,
  );
  process.stderr.write(
    store
      ? `agentloop: runs stored in ${describeStore(settings.db.location)} (${settings.db.from}): /v1/runs/{id}/approvals and /resume continue them${flags.resumeOrphans ? "; interrupted runs are resumed here by themselves" : ""}\n`
      : `agentloop: runs are not stored (${storeOff(flags, settings)}): previous_response_id, sessions, approvals and resume answer 501\n`,
  );
  if (keys.length > 0) {
    process.stderr.write(
      `agentloop: ${keys.length} client key${keys.length === 1 ? "" : "s"} (${keys.map((k) => k.name).join(", ")}${apiKey ? `, and AGENTLOOP_API_KEY as '${DEFAULT_OWNER}'` : ""}): each client sees only its own runs and sessions\n`,
    );
  }
  if (!loopback && !apiKey && keys.length === 0) {
    process.stderr.write(
      `agentloop: warning: --no-auth: anyone who can reach ${urlHost(host)}:${port} can run the agent and its tools.\n`,
    );
  }

  // Responses still being written, so shutdown closes connections only once theirs are sent.
  const writing = new Set<ServerResponse>();
  let flushed: () => void = () => {};
  http.on("request", (_req: IncomingMessage, res: ServerResponse) => {
    writing.add(res);
    res.once("close", () => {
      writing.delete(res);
      if (writing.size === 0) flushed();
    });
  });

  await new Promise<void>((resolve) => {
    let stopping = false;
    const closeNow = () => {
      http.close(() => resolve());
      http.closeAllConnections();
    };
    const stop = () => {
      if (stopping) return closeNow();
      stopping = true;
      process.stderr.write(
        `agentloop: shutting down: finishing the requests in flight (up to ${drainMs / 1000} s; again to stop at once)\n`,
      );
      // The MCP sessions then close: their streams end (a call still running is aborted).
      void server.shutdown({ deadlineMs: drainMs }).then(async () => {
        await mcp?.close();
        // The runs are over, but their last bytes may still be on their way to the clients.
        flushed = closeNow;
        if (writing.size === 0) closeNow();
        else setTimeout(closeNow, FLUSH_GRACE_MS).unref();
      });
    };
    process.on("SIGTERM", stop);
    process.on("SIGINT", stop);
    http.once("close", () => {
      process.off("SIGTERM", stop);
      process.off("SIGINT", stop);
    });
  });
  await close();
  return 0;
}

/** The config's `"serve": {"keys"}`, checked. */
function clientKeys(settings: Settings): ClientKey[] {
  const keys = settings.serve?.keys ?? [];
  const problem = clientKeysProblem(keys);
  if (problem)
    throw new AgentloopError("config", `${settings.configFile ?? "agentloop.json"}: serve.${problem}`);
  return keys;
}

/** What turned the store off (`--no-store` or config `"serve": {"store": false}`), if anything. */
function storeOff(flags: ServeFlags, settings: Settings): string | undefined {
  if (flags.store === false) return "--no-store";
  if (settings.serve?.store === false)
    return `"serve": {"store": false} in ${settings.configFile ?? "agentloop.json"}`;
  return undefined;
}

/**
 * The server's store, as `run --session` has it: `AGENTLOOP_DB`, config `"db"`, or the embedded
 * default `.agentloop/agentloop.db` under the working directory; none with `--no-store` (or
 * config `"serve": {"store": false}`).
 */
async function serverStore(settings: Settings, flags: ServeFlags): Promise<SessionStore | undefined> {
  const off = storeOff(flags, settings);
  if (flags.resumeOrphans && off)
    throw new AgentloopError(
      "config",
      `--resume-orphans needs a store, and ${off} turns it off: drop one of them.`,
    );
  if (flags.lease !== undefined && (off || !isPostgresUrl(settings.db.location)))
    throw new AgentloopError(
      "config",
      "--lease applies to a PostgreSQL store: set AGENTLOOP_DB to a postgres:// URL, or drop --lease (a SQLite store sees a dead process at once).",
    );
  if (off) return undefined;
  try {
    return await openStore(settings, flags.lease === undefined ? {} : { leaseMs: flags.lease * 1000 });
  } catch (error) {
    // Nobody asked for the default store (a read-only working folder, say): say how to go without.
    if (!(error instanceof AgentloopError) || settings.db.from !== "the default") throw error;
    throw new AgentloopError("config", `${error.message}; or serve without storing runs: --no-store`);
  }
}

/** Starts @hono/node-server; rejects with a one-line config error naming the option when the address cannot be bound. */
function listen(fetch: Parameters<typeof serve>[0]["fetch"], host: string, port: number): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = serve({ fetch, port, hostname: host }, () => resolve(server as Server));
    server.once("error", (error: NodeJS.ErrnoException) => {
      const why: Record<string, string> = {
        EADDRINUSE: `--port ${port} is in use on ${host}: pass another --port (0 picks a free one).`,
        EACCES: `--port ${port} needs privileges on ${host}: pass a --port above 1023.`,
        EADDRNOTAVAIL: `--host ${host} is not an address of this machine: pass one of its addresses, 127.0.0.1 or 0.0.0.0.`,
        ENOTFOUND: `--host ${host} does not resolve to an address: pass an address of this machine, 127.0.0.1 or 0.0.0.0.`,
        EAI_AGAIN: `--host ${host} could not be resolved (DNS unavailable): pass an IP address such as 127.0.0.1 or 0.0.0.0.`,
      };
      const message =
        (error.code !== undefined && Object.hasOwn(why, error.code) && why[error.code]) ||
        `Cannot listen on ${host}:${port}: ${errorMessage(error)}.`;
      reject(new AgentloopError("config", message));
    });
  });
}
