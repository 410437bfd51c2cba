import { createHash, timingSafeEqual } from "node:crypto";
import { Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import type { Agent } from "../core/agent.js";
import { chatCompletions } from "./chat.js";
import { errorResponse, unexpectedErrorResponse } from "./errors.js";
import { Metrics } from "./metrics.js";
import { RunTracker } from "./runs.js";
import { WEB_PAGE } from "./web-page.js";

export interface ServerOptions {
  /** Agents served as models, by model id, in the order `/v1/models` lists them; a request without `model` goes to the first. */
  agents: Readonly<Record<string, Agent>>;
  /** When set, every `/v1` request needs `Authorization: Bearer <apiKey>` (compared in constant time). */
  apiKey?: string;
  /** Largest request body accepted; larger ones get 413. Default 1 MiB. */
  maxBodyBytes?: number;
  /**
   * Host names (of the `Host` header, without the port; IPv6 in brackets) the server answers; others get 403. Set it
   * when bound to a loopback address, so a web page that rebinds its DNS name to 127.0.0.1
   * cannot reach the agent. Default: any host.
   */
  allowedHosts?: readonly string[];
}

export interface ShutdownOptions {
  /** How long runs in flight may take to finish before they are aborted. Default 10,000 ms. */
  deadlineMs?: number;
  /** After aborting, how long to wait for the aborted runs to close their streams. Default 2,000 ms. */
  graceMs?: number;
}

export interface AgentServer {
  app: Hono;
  metrics: Metrics;
  /** Whether `drain()` was called. */
  readonly draining: boolean;
  /** Stops taking new chat requests (503, and `/healthz` answers 503); the ones in flight go on. */
  drain(): void;
  /** Resolves when no chat request is in flight. */
  idle(): Promise<void>;
  /**
   * Graceful shutdown: drains, waits for the runs in flight up to the deadline, then aborts the
   * rest (each stream still ends with its closing chunks and `[DONE]`) and waits a short grace.
   * Never rejects. The caller then closes the HTTP server.
   */
  shutdown(options?: ShutdownOptions): Promise<void>;
}

const digest = (value: string) => createHash("sha256").update(value).digest();
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms).unref());

/**
 * The agents as an OpenAI-compatible API (SPEC section 6) plus a web chat at `/`, as a Hono
 * app: serve it with @hono/node-server, or call `app.request()` in tests. Routes:
 * `GET /` (web chat), `GET /healthz`, `GET /metrics` (Prometheus), and, behind the API key,
 * `GET /v1/models`, `GET /v1/models/:id`, `POST /v1/chat/completions`.
 */
export function createApp(options: ServerOptions): AgentServer {
  const ids = Object.keys(options.agents);
  const defaultModel = ids[0];
  if (defaultModel === undefined) throw new Error("createApp needs at least one agent.");
  const runs = new RunTracker();
  const metrics = new Metrics(() => runs.size);
  const expectedKey = options.apiKey ? digest(options.apiKey) : undefined;
  const allowedHosts = options.allowedHosts && new Set(options.allowedHosts.map((h) => h.toLowerCase()));
  let draining = false;

  const app = new Hono();
  app.onError((error) => unexpectedErrorResponse(error));
  app.notFound(() =>
    errorResponse(404, "Not found: the API is at /v1/chat/completions and /v1/models.", "not_found"),
  );

  if (allowedHosts) {
    app.use("*", async (c, next) => {
      const host = new URL(c.req.url).hostname;
      if (allowedHosts.has(host)) return next();
      const allowed = [...allowedHosts].join(", ");
      const message = `Host '${host}' is not allowed: this server answers requests for ${allowed} (a reverse proxy must send one of them as Host).`;
      return errorResponse(403, message, "host_not_allowed");
    });
  }

  app.get("/", (c) => c.html(WEB_PAGE));
  app.get("/healthz", (c) => c.json({ status: draining ? "draining" : "ok" }, draining ? 503 : 200));
  app.get("/metrics", (c) =>
    c.text(metrics.render(), 200, { "content-type": "text/plain; version=0.0.4; charset=utf-8" }),
  );

  app.use("/v1/chat/completions", async (c, next) => {
    await next();
    if (c.req.method === "POST") metrics.response(c.res.status);
  });
  app.use("/v1/*", async (c, next) => {
    if (!expectedKey) return next();
    const match = /^Bearer\s+(.+)$/i.exec(c.req.header("authorization") ?? "");
    // Digests have a fixed length, so the comparison takes the same time whatever was sent.
    if (match?.[1] && timingSafeEqual(digest(match[1].trim()), expectedKey)) return next();
    return errorResponse(
      401,
      "Invalid or missing API key: send Authorization: Bearer <AGENTLOOP_API_KEY>.",
      "invalid_api_key",
    );
  });

  const model = (id: string) => ({ id, object: "model" as const, created: 0, owned_by: "agentloop" });
  app.get("/v1/models", (c) => c.json({ object: "list", data: ids.map(model) }));
  app.get("/v1/models/:id{.+}", (c) => {
    const id = c.req.param("id");
    if (ids.includes(id)) return c.json(model(id));
    return errorResponse(404, `The model '${id}' does not exist.`, "model_not_found", { param: "model" });
  });

  app.post(
    "/v1/chat/completions",
    bodyLimit({
      maxSize: options.maxBodyBytes ?? 1024 * 1024,
      onError: () => errorResponse(413, "Request body too large.", "request_too_large"),
    }),
    (c) => {
      if (draining) {
        return errorResponse(503, "The server is shutting down: retry on another instance.", "shutting_down");
      }
      return chatCompletions(c, { agents: options.agents, defaultModel, metrics, runs });
    },
  );

  return {
    app,
    metrics,
    get draining() {
      return draining;
    },
    drain: () => {
      draining = true;
    },
    idle: () => runs.idle(),
    shutdown: async ({ deadlineMs = 10_000, graceMs = 2_000 } = {}) => {
      draining = true;
      await Promise.race([runs.idle(), sleep(deadlineMs)]);
      if (runs.size === 0) return;
      runs.abortAll();
      await Promise.race([runs.idle(), sleep(graceMs)]);
    },
  };
}
