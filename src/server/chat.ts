import { randomUUID } from "node:crypto";
import type { Context } from "hono";
import { streamSSE } from "hono/streaming";
import type { Agent } from "../agent/agent.js";
import type { RunHandle } from "../agent/handle.js";
import { errorMessage } from "../core/errors.js";
import type { AgentEvent, RunResult } from "../core/events.js";
import { errorResponse, finishReason, type Redact, runErrorResponse, SHUTDOWN_CUT } from "./errors.js";
import { type Chunk, ChunkMapper } from "./map-events.js";
import type { Metrics } from "./metrics.js";
import { chatRequestSchema, describeRequestIssue, toRunInput } from "./openai-compat.js";
import type { RequestLogEntry, ServerEnv } from "./request-log.js";
import type { RunTracker, TrackedRun } from "./runs.js";

/** What the chat completions endpoint needs from the app. */
export interface ChatDeps {
  agents: Readonly<Record<string, Agent>>;
  /** The model id of a request without `model`. */
  defaultModel: string;
  metrics: Metrics;
  runs: RunTracker;
  redact: Redact;
  /** How long a stream waits for the run's first output before sending its headers anyway. */
  holdMs: number;
  /** Interval of the `: keep-alive` comments that keep proxies from closing a quiet stream. */
  keepAliveMs: number;
}

type Step = IteratorResult<AgentEvent, undefined>;
const HELD = Symbol("held");

/**
 * `POST /v1/chat/completions` (SPEC section 6), after auth, the JSON content type, the body
 * limit and the draining check. Order of checks: JSON (400), schema and conversation (400), then
 * the model (404). The run is aborted when the client disconnects, streaming or not.
 */
export async function chatCompletions(c: Context<ServerEnv>, deps: ChatDeps): Promise<Response> {
  let raw: unknown;
  try {
    raw = await c.req.json();
  } catch {
    return errorResponse(400, "The request body is not valid JSON.", "invalid_json");
  }
  const parsed = chatRequestSchema.safeParse(raw);
  if (!parsed.success) {
    const { message, param } = describeRequestIssue(parsed.error);
    return errorResponse(400, message, "invalid_request", { param });
  }
  const request = parsed.data;
  const input = toRunInput(request);
  if ("param" in input) return errorResponse(400, input.message, "invalid_request", { param: input.param });
  const model = request.model ?? deps.defaultModel;
  // Own properties only: `constructor` or `__proto__` is an unknown model, not Object's.
  const agent = Object.hasOwn(deps.agents, model) ? deps.agents[model] : undefined;
  if (!agent) {
    const message = `The model '${model}' does not exist: GET /v1/models lists the served agents.`;
    return errorResponse(404, message, "model_not_found", { param: "model" });
  }

  const log = c.get("log");
  const run = deps.runs.start(c.req.raw.signal);
  let handedOver = false;
  try {
    const id = `chatcmpl-${randomUUID()}`;
    const events = agent.stream(input.input, {
      runId: id,
      signal: run.signal,
      history: input.history,
      ...(input.instructions !== "" && { instructions: input.instructions }),
    });
    const mapper = new ChunkMapper(id, model, Math.floor(Date.now() / 1000));
    const record = (result: RunResult) => {
      deps.metrics.record(model, result);
      if (log) log.stopReason = result.stopReason;
    };

    if (!request.stream) {
      for await (const event of events) mapper.map(event);
      const result = await events.result;
      record(result);
      if (run.cut) return errorResponse(503, SHUTDOWN_CUT.message, SHUTDOWN_CUT.code);
      const reason = finishReason(result.stopReason);
      return reason === undefined
        ? runErrorResponse(result, deps.redact)
        : c.json(mapper.completion(result, reason));
    }

    // Hold the headers a moment, until the run has output: a run that fails at once is a 502.
    const { head, next, ended } = await firstOutput(events, mapper, deps.holdMs);
    if (ended && finishReason(ended.stopReason) === undefined) {
      record(ended);
      return runErrorResponse(ended, deps.redact);
    }
    handedOver = true;
    const includeUsage = request.stream_options?.include_usage === true;
    log?.stream();
    return stream(c, { run, events, next, head, mapper, includeUsage, record, log, deps });
  } finally {
    if (!handedOver) run.end();
  }
}

/**
 * Reads the run until it has a chunk to send, it ended (`ended`), or `holdMs` passed. Returns the
 * chunks mapped so far and, when the last step read was not mapped into them, that step's promise
 * (still running, or the end): it has a handler (the race's), so a rejection is never unhandled.
 */
async function firstOutput(
  events: RunHandle,
  mapper: ChunkMapper,
  holdMs: number,
): Promise<{ head: Chunk[]; next: Promise<Step> | undefined; ended?: RunResult }> {
  let timer: NodeJS.Timeout | undefined;
  const held = new Promise<typeof HELD>((resolve) => {
    timer = setTimeout(() => resolve(HELD), holdMs);
  });
  try {
    for (;;) {
      const next = events.next();
      const step = await Promise.race([next, held]);
      if (step === HELD) return { head: [], next };
      if (step.done) return { head: [], next, ended: await events.result };
      const head = mapper.map(step.value);
      if (head.length > 0) return { head, next: undefined };
    }
  } finally {
    clearTimeout(timer);
  }
}

interface StreamState {
  run: TrackedRun;
  events: RunHandle;
  /** The next step when it was already asked for (before the headers went). */
  next: Promise<Step> | undefined;
  /** Chunks mapped before the headers went. */
  head: Chunk[];
  mapper: ChunkMapper;
  includeUsage: boolean;
  record(result: RunResult): void;
  log: RequestLogEntry | undefined;
  deps: ChatDeps;
}

/**
 * The SSE response: a role chunk at once, the mapped events as they come, the closing chunks,
 * then `data: [DONE]`. Each write waits for the client to take the previous ones (backpressure),
 * so a slow reader slows its run instead of filling memory. Ends the tracked run.
 */
function stream(c: Context, s: StreamState): Response {
  c.header("x-accel-buffering", "no");
  return streamSSE(c, async (sse) => {
    sse.onAbort(s.run.abort);
    const keepAlive = setInterval(() => void sse.write(": keep-alive\n\n"), s.deps.keepAliveMs);
    keepAlive.unref();
    const send = (chunk: Chunk) => sse.writeSSE({ data: JSON.stringify(chunk) });
    let stopReason: string | undefined;
    try {
      await send(s.mapper.chunk({ role: "assistant", content: "" }));
      for (const chunk of s.head) await send(chunk);
      let next = await (s.next ?? s.events.next());
      while (!next.done) {
        for (const chunk of s.mapper.map(next.value)) await send(chunk);
        next = await s.events.next();
      }
      const result = await s.events.result;
      s.record(result);
      stopReason = result.stopReason;
      const cut = s.run.cut ? { ...SHUTDOWN_CUT, runId: result.runId } : undefined;
      for (const chunk of s.mapper.finish(result, s.includeUsage, cut)) await send(chunk);
    } catch (error) {
      // Not a model or tool failure (those end the run normally): a bug, or an onEvent hook that threw.
      s.run.abort();
      const event: AgentEvent = {
        type: "error",
        message: s.deps.redact(`Internal server error: ${errorMessage(error)}`),
        code: "internal_error",
        runId: s.events.runId,
      };
      stopReason = "internal_error";
      await send(s.mapper.chunk({}, event, "stop"));
    } finally {
      clearInterval(keepAlive);
      await sse.writeSSE({ data: "[DONE]" });
      s.run.end();
      s.log?.end(stopReason);
    }
  });
}
