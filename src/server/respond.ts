import type { Context } from "hono";
import { streamSSE } from "hono/streaming";
import type { RunHandle } from "../agent/handle.js";
import { errorMessage } from "../core/errors.js";
import type { AgentEvent, RunResult } from "../core/events.js";
import { errorResponse, finishReason, type Redact, runErrorResponse, SHUTDOWN_CUT } from "./errors.js";
import { type Chunk, ChunkMapper } from "./map-events.js";
import type { Metrics } from "./metrics.js";
import type { RequestLogEntry, ServerEnv } from "./request-log.js";
import type { RunTracker, TrackedRun } from "./runs.js";

/** What answering a run needs from the app. */
export interface AnswerDeps {
  metrics: Metrics;
  runs: RunTracker;
  redact: Redact;
  /** How long a stream waits for the run's first output before sending its headers anyway. */
  holdMs: number;
  /** Interval of the `: keep-alive` comments that keep proxies from closing a quiet stream. */
  keepAliveMs: number;
}

/** A started run to answer as a chat completion. */
export interface RunAnswer {
  handle: RunHandle;
  /** The tracked run whose signal the handle got; ended once the response is complete. */
  run: TrackedRun;
  /** The completion's `id`: the run's id. */
  id: string;
  model: string;
  stream: boolean;
  includeUsage: boolean;
  /**
   * Gives the run's session up; called once the run has stopped, before the last chunks go out
   * (so the client may continue the run at once), and again (idempotent) when the response ends.
   * Must not reject.
   */
  release?: () => Promise<void>;
}

type Step = IteratorResult<AgentEvent, undefined>;
const HELD = Symbol("held");
const nothing = async () => {};

/**
 * Answers a run like `POST /v1/chat/completions` (SPEC section 6): a `chat.completion`, or with
 * `stream` Server-Sent Events of chunks ending with `data: [DONE]`; a run that ends on an error
 * stop before anything was streamed is a 502. Ends the tracked run (and releases) in every case.
 */
export async function answerRun(c: Context<ServerEnv>, deps: AnswerDeps, a: RunAnswer): Promise<Response> {
  const log = c.get("log");
  const release = a.release ?? nothing;
  const mapper = new ChunkMapper(a.id, a.model, Math.floor(Date.now() / 1000));
  const record = (result: RunResult) => {
    deps.metrics.record(a.model, result);
    if (log) log.stopReason = result.stopReason;
  };
  let handedOver = false;
  try {
    if (!a.stream) {
      for await (const event of a.handle) mapper.map(event);
      const result = await a.handle.result;
      await release();
      record(result);
      if (a.run.cut) return errorResponse(503, SHUTDOWN_CUT.message, SHUTDOWN_CUT.code);
      const reason = finishReason(result.stopReason);
      return reason === undefined
        ? runErrorResponse(result, deps.redact)
        : c.json(mapper.completion(result, reason));
    }

    // Hold the headers a moment, until the run has output: a run that fails at once is a 502.
    const { head, next, ended } = await firstOutput(a.handle, mapper, deps.holdMs);
    if (ended && finishReason(ended.stopReason) === undefined) {
      await release();
      record(ended);
      return runErrorResponse(ended, deps.redact);
    }
    handedOver = true;
    log?.stream();
    return stream(c, { ...a, release, next, head, mapper, record, log, deps });
  } finally {
    if (!handedOver) {
      await release();
      a.run.end();
    }
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

interface StreamState extends RunAnswer {
  release: () => Promise<void>;
  /** The next step when it was already asked for (before the headers went). */
  next: Promise<Step> | undefined;
  /** Chunks mapped before the headers went. */
  head: Chunk[];
  mapper: ChunkMapper;
  record(result: RunResult): void;
  log: RequestLogEntry | undefined;
  deps: AnswerDeps;
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
      let next = await (s.next ?? s.handle.next());
      while (!next.done) {
        for (const chunk of s.mapper.map(next.value)) await send(chunk);
        next = await s.handle.next();
      }
      const result = await s.handle.result;
      await s.release();
      s.record(result);
      stopReason = result.stopReason;
      const cut = s.run.cut ? { ...SHUTDOWN_CUT, runId: result.runId } : undefined;
      for (const chunk of s.mapper.finish(result, s.includeUsage, cut)) await send(chunk);
    } catch (error) {
      // Not a model or tool failure (those end the run normally): a bug, a store that failed, or an onEvent hook that threw.
      s.run.abort();
      const event: AgentEvent = {
        type: "error",
        message: s.deps.redact(`Internal server error: ${errorMessage(error)}`),
        code: "internal_error",
        runId: s.handle.runId,
      };
      stopReason = "internal_error";
      await send(s.mapper.chunk({}, event, "stop"));
    } finally {
      clearInterval(keepAlive);
      await s.release();
      await sse.writeSSE({ data: "[DONE]" });
      s.run.end();
      s.log?.end(stopReason);
    }
  });
}
