import { type Context, Hono, type MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import { secureHeaders } from "hono/secure-headers";
import type { AnyAgent } from "../agent/agent.js";
import { echoed, redactSecrets } from "../core/redact.js";
import type { SessionStore } from "../store/types.js";
import { A2A_PATH, mountA2a } from "./a2a.js";
import { chatCompletions } from "./chat.js";
import { errorResponse, MAX_SHOWN_CHARS, type Redact, unexpectedErrorResponse } from "./errors.js";
import { type AcceptedKey, acceptedKey, bearerKey, hostGuard, jsonBody, originGuard } from "./guards.js";
import type { McpHttpHandler } from "./mcp-http.js";
import { Metrics } from "./metrics.js";
import { resumeOrphans } from "./orphans.js";
import { type ClientKey, clientKeysProblem, DEFAULT_OWNER, ownedStore } from "./owners.js";
import { requestLog, type ServerEnv } from "./request-log.js";
import { createResponse } from "./responses.js";
import { compactResponse } from "./responses-compact.js";
import type { EndpointDeps } from "./run-request.js";
import { continueRun, getRun } from "./run-routes.js";
import { RunTracker } from "./runs.js";
import { measuredStore, pingStore } from "./store-metrics.js";
import { traceContext } from "./trace-context.js";
import { FAVICON_SVG, WEB_PAGE, WEB_PAGE_CSP } from "./web-page.js";

export interface ServerOptions {
  /** Agents served as models, by model id, in the order `/v1/models` lists them; a request without `model` goes to the first. */
  agents: Readonly<Record<string, AnyAgent>>;
  /** When set, every `/v1` request and `/metrics` need `Authorization: Bearer <apiKey>` (compared in constant time). */
  apiKey?: string;
  /**
   * One key per client (each its SHA-256, hex): every `/v1` request and `/metrics` need one of
   * them (or `apiKey`, whose client is then named `default`). The runs and sessions a client
   * creates are its own: another client's are not found (404), and session names are per client.
   * @throws TypeError from `createApp` for a bad entry (name, digest, duplicate).
   */
  keys?: readonly ClientKey[];
  /** Largest request body accepted; larger ones get 413. Default 8 MiB (room for an image of 5 MiB, inline). */
  maxBodyBytes?: number;
  /**
   * Host names (of the `Host` header, without the port; IPv6 in brackets) the server answers; others get 403. Set it
   * when bound to a loopback address, so a web page that rebinds its DNS name to 127.0.0.1
   * cannot reach the agent. Default: any host.
   */
  allowedHosts?: readonly string[];
  /**
   * Origins (`https://app.example.com`) whose web pages may call the API cross-origin (CORS);
   * `"*"` allows any. Other origins get 403. Default none: only the server's own page.
   */
  corsOrigins?: readonly string[];
  /** Texts that must never appear in an error body or a log line (upstream API keys); `apiKey` is always one. */
  secrets?: readonly string[];
  /** Receives one line per request once its response is complete: `POST /v1/chat/completions 200 812ms final_answer`. */
  log?: (line: string) => void;
  /** How long a stream waits for the run's first output before sending its headers and role chunk; a run that fails sooner gets a 502. Default 250 ms. */
  streamHoldMs?: number;
  /** Interval of the `: keep-alive` comments of a stream (while a tool runs, say). Default 15,000 ms. */
  keepAliveMs?: number;
  /**
   * Where runs are stored (SPEC section 9). With it, every run is stored under its id (the
   * completion's `id`), in a session of its own or the one named by the `X-Agentloop-Session`
   * header, and `/v1/runs/{runId}` continues it: `POST .../approvals`, `POST .../resume` (after
   * its process died), `GET`. Without it nothing is stored and those answer 501. The caller
   * closes it.
   */
  store?: SessionStore;
  /**
   * With a store: resume interrupted runs by themselves (runs whose process died, or that a
   * server cut at shutdown), with the first agent, every `everyMs` (default 5,000), at most
   * `concurrency` (default 4) at once on this server. Replicas sharing the store take each run
   * once.
   */
  resumeOrphans?: { everyMs?: number; concurrency?: number };
  /**
   * MCP over Streamable HTTP at `/mcp` (SPEC section 14), behind the same key as `/v1`: answers
   * each request, given its client (and that client's store, as `/v1` sees it).
   */
  mcp?: McpHttpHandler["handle"];
}

export interface ShutdownOptions {
  /** How long runs in flight may take to finish before they are aborted. Default 10,000 ms. */
  deadlineMs?: number;
  /** After aborting, how long to wait for the aborted runs to close their streams. Default 2,000 ms. */
  graceMs?: number;
}

export interface AgentServer {
  app: Hono<ServerEnv>;
  metrics: Metrics;
  /** Whether `drain()` was called. */
  readonly draining: boolean;
  /** Stops taking new chat requests (503, and `/healthz` answers 503); the ones in flight go on. */
  drain(): void;
  /** Resolves when no chat request is in flight. */
  idle(): Promise<void>;
  /**
   * Graceful shutdown: drains, waits for the runs in flight up to the deadline, then aborts the
   * rest (a stream ends with the `turn_complete` chunk, an `error` chunk with code
   * `shutting_down`, and `[DONE]`; a non-streaming request gets a 503) and waits a short grace.
   * Never rejects. The caller then closes the HTTP server once the responses are sent.
   */
  shutdown(options?: ShutdownOptions): Promise<void>;
}

/** The keys the server takes: `apiKey` (its client `default` beside `keys`) and each client's. */
function acceptedKeys({ apiKey, keys = [] }: ServerOptions): AcceptedKey[] {
  const problem = clientKeysProblem(keys);
  if (problem) throw new TypeError(`createApp: ${problem}`);
  const accepted: AcceptedKey[] = keys.map(({ name, sha256 }) => ({
    sha256: Buffer.from(sha256, "hex"),
    owner: name,
  }));
  if (apiKey) accepted.push(acceptedKey(apiKey, keys.length > 0 ? DEFAULT_OWNER : undefined));
  return accepted;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms).unref());

/**
 * The agents as an OpenAI-compatible API (SPEC section 6) plus a web chat at `/`, as a Hono
 * app: serve it with @hono/node-server, or call `app.request()` in tests. Routes:
 * `GET /` (web chat), `GET /favicon.ico`, `GET /healthz`, `GET /metrics` (Prometheus), and, behind the API key,
 * `GET /v1/models`, `GET /v1/models/:id`, `POST /v1/chat/completions`, `POST /v1/responses`
 * (the Responses API, see `createResponse`), `POST /v1/responses/compact` (see `compactResponse`), `GET /v1/runs/:runId`,
 * `POST /v1/runs/:runId/approvals` and `POST /v1/runs/:runId/resume`; MCP at `/mcp` when given (mcp-http.ts); and
 * Agent2Agent (a2a.ts): the public card at `/.well-known/agent-card.json`, JSON-RPC at `POST /a2a` behind the key. Every response carries
 * `X-Content-Type-Options: nosniff`, `Referrer-Policy: no-referrer` and `X-Frame-Options: DENY`;
 * the page a Content-Security-Policy that allows only its own script and style.
 */
export function createApp(options: ServerOptions): AgentServer {
  const ids = Object.keys(options.agents);
  const defaultModel = ids[0];
  if (defaultModel === undefined) throw new Error("createApp needs at least one agent.");
  const runs = new RunTracker();
  const metrics = new Metrics(() => runs.size);
  const secrets = [options.apiKey, ...(options.secrets ?? [])];
  const redact: Redact = (text, max = MAX_SHOWN_CHARS) => redactSecrets(text, secrets, max);
  let draining = false;
  const store = options.store && measuredStore(options.store, metrics);
  const keys = acceptedKeys(options);

  const app = new Hono<ServerEnv>();
  app.onError((error) => unexpectedErrorResponse(error, redact));
  app.notFound(() =>
    errorResponse(
      404,
      "Not found: the API is at /v1/chat/completions, /v1/responses, /v1/models and /v1/runs/{runId}.",
      "not_found",
    ),
  );

  const { log } = options;
  if (log) app.use("*", requestLog(log, redact));
  app.use("*", secureHeaders({ xFrameOptions: "DENY", strictTransportSecurity: false }));
  if (options.allowedHosts) app.use("*", hostGuard(options.allowedHosts));
  app.use("*", originGuard(options.corsOrigins));
  if (keys.length > 0) {
    const auth = bearerKey(keys);
    app.use("/v1/*", auth);
    app.use("/metrics", auth);
    app.use("/mcp", auth);
    app.use(A2A_PATH, auth);
  }
  app.use("/v1/*", jsonBody);
  app.use("/v1/*", traceContext);

  app.get("/", (c) => c.html(WEB_PAGE, 200, { "content-security-policy": WEB_PAGE_CSP }));
  // Browsers ask for it whatever the page says (for a JSON response viewed in a tab, say).
  app.get("/favicon.ico", (c) =>
    c.body(FAVICON_SVG, 200, { "content-type": "image/svg+xml", "cache-control": "max-age=86400" }),
  );
  // Ready when not draining and the store (if any) answers: a load balancer sends nothing to a replica that cannot store runs.
  app.get("/healthz", async (c) => {
    if (draining) return c.json({ status: "draining" }, 503);
    if (!store) return c.json({ status: "ok" });
    const ping = await pingStore(store);
    if ("error" in ping)
      return c.json({ status: "store_unreachable", store: { ok: false, error: redact(ping.error) } }, 503);
    return c.json({ status: "ok", store: { ok: true, pingMs: Math.round(ping.seconds * 1e6) / 1e3 } });
  });
  app.get("/metrics", async (c) => {
    let storeGauges: Parameters<Metrics["render"]>[0];
    if (store) {
      const ping = await pingStore(store);
      const up = !("error" in ping);
      const interrupted = up
        ? await store.list({ status: "interrupted", limit: 10_000 }).then(
            (list) => list.length,
            () => undefined,
          )
        : undefined;
      storeGauges = {
        up,
        pingSeconds: up ? ping.seconds : 0,
        ...(interrupted !== undefined && { interrupted }),
      };
    }
    return c.text(metrics.render(storeGauges), 200, {
      "content-type": "text/plain; version=0.0.4; charset=utf-8",
    });
  });

  const countResponses: MiddlewareHandler = async (c, next) => {
    await next();
    if (c.req.method === "POST") metrics.response(c.res.status);
  };
  app.use("/v1/chat/completions", countResponses);
  app.use("/v1/responses", countResponses);

  const model = (id: string) => ({ id, object: "model" as const, created: 0, owned_by: "agentloop" });
  app.get("/v1/models", (c) => c.json({ object: "list", data: ids.map(model) }));
  app.get("/v1/models/:id{.+}", (c) => {
    const id = c.req.param("id");
    if (ids.includes(id)) return c.json(model(id));
    return errorResponse(404, `The model '${echoed(id)}' does not exist.`, "model_not_found", {
      param: "model",
    });
  });

  const maxBodyBytes = options.maxBodyBytes ?? 8 * 1024 * 1024;
  const limit = bodyLimit({
    maxSize: maxBodyBytes,
    onError: () => errorResponse(413, "Request body too large.", "request_too_large"),
  });
  const deps: EndpointDeps = {
    agents: options.agents,
    defaultModel,
    store,
    metrics,
    runs,
    redact,
    holdMs: options.streamHoldMs ?? 250,
    keepAliveMs: options.keepAliveMs ?? 15_000,
  };
  const refuseWhileDraining: MiddlewareHandler = async (_c, next) => {
    if (!draining) return next();
    return errorResponse(503, "The server is shutting down: retry on another instance.", "shutting_down");
  };
  // A client with its own key sees its own runs and sessions only.
  const depsOf = (c: Context<ServerEnv>): EndpointDeps => {
    const owner = c.get("owner");
    return owner === undefined || !store ? deps : { ...deps, store: ownedStore(store, owner) };
  };
  app.post("/v1/chat/completions", limit, refuseWhileDraining, (c) => chatCompletions(c, depsOf(c)));
  app.post("/v1/responses", limit, refuseWhileDraining, (c) => createResponse(c, depsOf(c)));
  app.post("/v1/responses/compact", limit, refuseWhileDraining, (c) => compactResponse(c, depsOf(c)));
  app.get("/v1/runs/:runId", (c) => getRun(c, depsOf(c)));
  app.post("/v1/runs/:runId/approvals", limit, refuseWhileDraining, (c) =>
    continueRun(c, depsOf(c), "approvals"),
  );
  app.post("/v1/runs/:runId/resume", limit, refuseWhileDraining, (c) => continueRun(c, depsOf(c), "resume"));
  const { mcp } = options;
  if (mcp) app.all("/mcp", (c) => mcp(c.req.raw, { owner: c.get("owner"), store: depsOf(c).store }));
  mountA2a(app, deps, { secured: keys.length > 0, maxBodyBytes }, refuseWhileDraining);

  const stopOrphans =
    store && options.resumeOrphans
      ? resumeOrphans({
          store,
          agents: options.agents,
          model: defaultModel,
          runs,
          metrics,
          everyMs: options.resumeOrphans.everyMs ?? 5_000,
          concurrency: options.resumeOrphans.concurrency ?? 4,
          log: (line) => options.log?.(redact(line)),
        })
      : () => {};

  return {
    app,
    metrics,
    get draining() {
      return draining;
    },
    drain: () => {
      draining = true;
      stopOrphans();
    },
    idle: () => runs.idle(),
    shutdown: async ({ deadlineMs = 10_000, graceMs = 2_000 } = {}) => {
      draining = true;
      stopOrphans();
      await Promise.race([runs.idle(), sleep(deadlineMs)]);
      if (runs.size === 0) return;
      runs.abortAll();
      await Promise.race([runs.idle(), sleep(graceMs)]);
    },
  };
}
