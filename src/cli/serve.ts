import type { Server } from "node:http";
import { serve } from "@hono/node-server";
import { createApp } from "../server/app.js";
import type { CliFlags } from "./config.js";
import { setupAgent } from "./run.js";

export interface ServeFlags extends CliFlags {
  port: number;
  host: string;
}

/** How long in-flight answers may take to finish after SIGTERM before the server closes anyway. */
const DRAIN_DEADLINE_MS = 10_000;

/**
 * `agentloop serve`: the agent as an OpenAI-compatible model on `--host` (default 127.0.0.1)
 * and `--port` (default 8787). SIGTERM or SIGINT drains: new requests get 503, answers in
 * flight finish (up to a deadline), then the server closes. Resolves to the exit code.
 */
export async function serveCommand(flags: ServeFlags): Promise<number> {
  const { settings, agent, close } = await setupAgent(flags);
  const apiKey = process.env.AGENTLOOP_API_KEY?.trim() || undefined;
  const server = createApp({ agents: { [settings.model]: agent }, ...(apiKey && { apiKey }) });
  const http = await new Promise<Server>((resolve, reject) => {
    const listening = serve({ fetch: server.app.fetch, port: flags.port, hostname: flags.host }, () =>
      resolve(listening as Server),
    );
    listening.once("error", reject);
  });
  const address = http.address();
  const port = typeof address === "object" && address ? address.port : flags.port;
  const auth = apiKey ? "; AGENTLOOP_API_KEY required" : "";
  process.stderr.write(
    `agentloop: serving ${settings.model} on http://${flags.host}:${port} (OpenAI-compatible: /v1/chat/completions; web chat: /${auth})\n`,
  );

  await new Promise<void>((resolve) => {
    const stop = () => {
      process.off("SIGTERM", stop);
      process.off("SIGINT", stop);
      process.stderr.write("agentloop: shutting down\n");
      server.drain();
      const deadline = new Promise((r) => setTimeout(r, DRAIN_DEADLINE_MS).unref());
      void Promise.race([server.idle(), deadline]).then(() => {
        http.close(() => resolve());
        http.closeAllConnections();
      });
    };
    process.on("SIGTERM", stop);
    process.on("SIGINT", stop);
  });
  await close();
  return 0;
}
