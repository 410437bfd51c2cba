import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import OpenAI from "openai";
import { afterEach } from "vitest";
import { createApp, type ServerOptions } from "../../src/server/index.js";

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});

/**
 * Serves `createApp(options)` on a free port of 127.0.0.1 until the end of the test, with the
 * official client pointed at it (`apiKey` "none" unless given).
 */
export async function listen(options: ServerOptions, apiKey = "none") {
  const server = createApp(options);
  const http = await new Promise<Server>((resolve) => {
    const s = serve({ fetch: server.app.fetch, port: 0, hostname: "127.0.0.1" }, () => resolve(s as Server));
  });
  closers.push(
    () =>
      new Promise((resolve) => {
        http.close(() => resolve());
        http.closeAllConnections();
      }),
  );
  const port = (http.address() as AddressInfo).port;
  const baseURL = `http://127.0.0.1:${port}/v1`;
  return { server, port, baseURL, client: new OpenAI({ baseURL, apiKey, maxRetries: 0 }) };
}
