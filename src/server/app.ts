import { createHash, randomUUID, timingSafeEqual } from "node:crypto";
import { Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import { streamSSE } from "hono/streaming";
import type { Agent } from "../core/agent.js";
import type { AgentEvent, RunResult } from "../core/events.js";
import { type ErrorStatus, errorBody, finishReason } from "./errors.js";
import { type Chunk, ChunkMapper, wireUsage } from "./map-events.js";
import { Metrics } from "./metrics.js";
import { chatRequestSchema, describeRequestIssue, toRunInput } from "./openai-compat.js";
import { WEB_PAGE } from "./web-page.js";

export interface ServerOptions {
  /** Agents served as models, by model id; a request without `model` goes to the first. */
  agents: Readonly<Record<string, Agent>>;
  /** When set, every `/v1` request needs `Authorization: Bearer <apiKey>`. */
  apiKey?: string;
  /** Largest request body accepted; larger ones get 413. Default 1 MiB. */
  maxBodyBytes?: number;
}

export interface AgentServer {
  app: Hono;
  metrics: Metrics;
  /** Stops taking new chat requests (they get 503); the ones in flight go on. */
  drain(): void;
  /** Resolves when no chat request is in flight. */
  idle(): Promise<void>;
}

const digest = (value: string) => createHash("sha256").update(value).digest();

/**
 * The agents as an OpenAI-compatible API (SPEC section 6) plus a web chat at `/`, as a Hono
 * app: serve it with @hono/node-server, or call `app.request()` in tests.
 */
export function createApp(options: ServerOptions): AgentServer {
  const ids = Object.keys(options.agents);
  if (ids.length === 0) throw new Error("createApp needs at least one agent.");
  const metrics = new Metrics();
  const expectedKey = options.apiKey ? digest(options.apiKey) : undefined;
  let draining = false;
  const onIdle: (() => void)[] = [];
  const fail = (status: ErrorStatus, message: string, code: string | null = null) =>
    new Response(JSON.stringify(errorBody(status, message, code)), {
      status,
      headers: { "content-type": "application/json" },
    });

  const app = new Hono();
  app.get("/", (c) => c.html(WEB_PAGE));
  app.get("/healthz", (c) => c.json({ status: draining ? "draining" : "ok" }));
  app.get("/metrics", (c) => c.text(metrics.render(), 200, { "content-type": "text/plain; version=0.0.4" }));

  app.use("/v1/*", async (c, next) => {
    if (expectedKey) {
      const header = c.req.header("authorization") ?? "";
      const given = header.startsWith("Bearer ") ? header.slice(7) : "";
      // Digests have a fixed length, so the comparison takes the same time whatever was sent.
      if (!timingSafeEqual(digest(given), expectedKey)) {
        return fail(
          401,
          "Invalid or missing API key: send Authorization: Bearer <AGENTLOOP_API_KEY>.",
          "invalid_api_key",
        );
      }
    }
    return next();
  });

  app.get("/v1/models", (c) =>
    c.json({
      object: "list",
      data: ids.map((id) => ({ id, object: "model", created: 0, owned_by: "agentloop" })),
    }),
  );

  app.post(
    "/v1/chat/completions",
    bodyLimit({
      maxSize: options.maxBodyBytes ?? 1024 * 1024,
      onError: () => fail(413, "Request body too large.", "request_too_large"),
    }),
    async (c) => {
      if (draining)
        return fail(503, "The server is shutting down; retry on another instance.", "shutting_down");
      let raw: unknown;
      try {
        raw = await c.req.json();
      } catch {
        return fail(400, "The request body is not valid JSON.", "invalid_json");
      }
      const parsed = chatRequestSchema.safeParse(raw);
      if (!parsed.success) return fail(400, describeRequestIssue(parsed.error), "invalid_request");
      const request = parsed.data;
      const run = toRunInput(request);
      if (typeof run === "string") return fail(400, run, "invalid_request");
      const model = request.model ?? (ids[0] as string);
      const agent = options.agents[model];
      if (!agent)
        return fail(
          404,
          `The model '${model}' does not exist: GET /v1/models lists the served agents.`,
          "model_not_found",
        );

      // A client that goes away aborts its run, its model call and its tool calls.
      const controller = new AbortController();
      c.req.raw.signal.addEventListener("abort", () => controller.abort(), { once: true });
      metrics.inFlight++;
      const done = () => {
        metrics.inFlight--;
        if (metrics.inFlight === 0) for (const resolve of onIdle.splice(0)) resolve();
      };
      const events = agent.stream(run.input, {
        signal: controller.signal,
        history: run.history,
        ...(run.instructions && { instructions: run.instructions }),
      });
      const id = `chatcmpl-${randomUUID()}`;
      const created = Math.floor(Date.now() / 1000);

      if (!request.stream) {
        try {
          let next = await events.next();
          while (!next.done) next = await events.next();
          const result = next.value;
          metrics.record(result);
          const reason = finishReason(result.stopReason);
          if (reason === undefined)
            return fail(502, result.error?.message ?? result.stopReason, result.stopReason);
          return c.json({
            id,
            object: "chat.completion",
            created,
            model,
            choices: [
              { index: 0, message: { role: "assistant", content: result.output }, finish_reason: reason },
            ],
            usage: wireUsage(result.usage),
            agentloop: { stopReason: result.stopReason, iterations: result.iterations },
          });
        } finally {
          done();
        }
      }

      const mapper = new ChunkMapper(id, model, created);
      const includeUsage = request.stream_options?.include_usage === true;
      // Hold the response until something is worth sending, so a run that fails first gets a 502.
      const pending: Chunk[] = [mapper.chunk({ role: "assistant", content: "" })];
      let next = await events.next();
      let last: AgentEvent | undefined;
      while (!next.done && pending.length === 1) {
        last = next.value;
        pending.push(...mapper.map(next.value));
        next = await events.next();
      }
      if (next.done && pending.length === 1 && finishReason(next.value.stopReason) === undefined) {
        metrics.record(next.value);
        done();
        return fail(502, next.value.error?.message ?? next.value.stopReason, next.value.stopReason);
      }
      return streamSSE(c, async (sse) => {
        sse.onAbort(() => controller.abort());
        const send = (chunk: Chunk) => sse.writeSSE({ data: JSON.stringify(chunk) });
        try {
          for (const chunk of pending) await send(chunk);
          let result: RunResult;
          while (true) {
            if (next.done) {
              result = next.value;
              break;
            }
            last = next.value;
            for (const chunk of mapper.map(next.value)) await send(chunk);
            next = await events.next();
          }
          metrics.record(result);
          for (const chunk of mapper.finish(result, last, includeUsage)) await send(chunk);
          await sse.writeSSE({ data: "[DONE]" });
        } finally {
          done();
        }
      });
    },
  );

  app.notFound(() => fail(404, "Not found: the API is at /v1/chat/completions and /v1/models.", "not_found"));

  return {
    app,
    metrics,
    drain: () => {
      draining = true;
    },
    idle: () =>
      metrics.inFlight === 0
        ? Promise.resolve()
        : new Promise<void>((resolve) => {
            onIdle.push(resolve);
          }),
  };
}
