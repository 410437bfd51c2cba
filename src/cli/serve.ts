import type { IncomingMessage, Server, ServerResponse } from "node:http";
import { serve } from "@hono/node-server";
import { AgentloopError, errorMessage } from "../core/errors.js";
import { createApp } from "../server/app.js";
import type { CliFlags } from "./config.js";
import { setupAgent } from "./run.js";

export interface ServeFlags extends CliFlags {
  /** Port to listen on; 0 picks a free one. Default 8787. */
  port?: number;
  /** Interface to bind. Default 127.0.0.1 (loopback only); 0.0.0.0 exposes the server. */
  host?: string;
}

export const DEFAULT_PORT = 8787;
export const DEFAULT_HOST = "127.0.0.1";
/** How long in-flight answers may take to finish after SIGTERM before they are aborted. */
const DRAIN_DEADLINE_MS = 10_000;
/** After the runs are over, how long responses may take to reach their clients before connections are cut. */
const FLUSH_GRACE_MS = 2_000;
const LOOPBACK = new Set(["127.0.0.1", "localhost", "::1", "[::1]"]);

/**
 * `agentloop serve`: the agent (built-in and MCP tools included) as an OpenAI-compatible model
 * named after the configured model id, on `--host` and `--port`. `AGENTLOOP_API_KEY`, when set,
 * is required from clients. On a loopback host, requests for other host names are refused
 * (DNS rebinding). SIGTERM or SIGINT drains: new requests get 503, answers in flight finish up
 * to a deadline and are then aborted; a second signal stops at once. Resolves to the exit code
 * (0) once the server has closed.
 * @throws AgentloopError("config") for bad settings or an address that cannot be bound.
 */
export async function serveCommand(flags: ServeFlags): Promise<number> {
  const host = flags.host ?? DEFAULT_HOST;
  const { settings, agent, close } = await setupAgent(flags);
  const apiKey = process.env.AGENTLOOP_API_KEY?.trim() || undefined;
  const loopback = LOOPBACK.has(host);
  const server = createApp({
    agents: { [settings.model]: agent },
    ...(apiKey && { apiKey }),
    ...(loopback && { allowedHosts: ["127.0.0.1", "localhost", "[::1]"] }),
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
  const origin = `http://${host.includes(":") && !host.startsWith("[") ? `[${host}]` : host}:${port}`;
  process.stderr.write(
    `agentloop: serving ${settings.model} on ${origin} (OpenAI-compatible: /v1/chat/completions)\n`,
  );
  if (!loopback && !apiKey) {
    process.stderr.write(
      `agentloop: warning: ${host} is reachable from other machines and AGENTLOOP_API_KEY is not set: anyone who can connect can run the agent.\n`,
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
      process.stderr.write("agentloop: shutting down (again to stop at once)\n");
      void server.shutdown({ deadlineMs: DRAIN_DEADLINE_MS }).then(() => {
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

/** Starts @hono/node-server; rejects with a one-line config error when the address cannot be bound. */
function listen(fetch: Parameters<typeof serve>[0]["fetch"], host: string, port: number): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = serve({ fetch, port, hostname: host }, () => resolve(server as Server));
    server.once("error", (error: NodeJS.ErrnoException) => {
      const why =
        error.code === "EADDRINUSE"
          ? `port ${port} is in use: pass another --port (0 picks a free one)`
          : errorMessage(error);
      reject(new AgentloopError("config", `Cannot listen on ${host}:${port}: ${why}.`));
    });
  });
}
