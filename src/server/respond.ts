import type { Context } from "hono";
import { streamSSE } from "hono/streaming";
import type { RunHandle } from "../agent/handle.js";
import { errorMessage } from "../core/errors.js";
import type { AgentEvent, RunResult } from "../core/events.js";
import { StoreError } from "../store/types.js";
import {
  clientError,
  errorResponse,
  finishReason,
  type Redact,
  runErrorResponse,
  shutdownCut,
  storeFailure,
  withheld,
} from "./errors.js";
import { ChunkMapper, type ErrorEvent } from "./map-events.js";
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

/**
 * How a run's events go on the wire: chat completion chunks (the default) or Responses API
 * events. Pure apart from what it remembers of the run.
 */
export interface RunWire<T> {
  /** The items for one event, in order; none for events that carry nothing for the client yet. */
  map(event: AgentEvent): T[];
  /** What a stream starts with, sent with the headers (chat: the role chunk). */
  open(): T[];
  /** The closing items once the run ended; `cut`: the error that ended it from outside (the shutdown deadline). */
  finish(result: RunResult, cut?: ErrorEvent): T[];
  /** The non-streaming answer of a run that did not end on an error stop; call after every event was mapped. */
  whole(result: RunResult): unknown;
  /** What ends a stream after an internal error. */
  failed(error: ErrorEvent): T[];
  sse(item: T): SSEItem;
  /** Sent last, after everything (chat: `[DONE]`). */
  last?: string;
}

/** One Server-Sent Event: its name, when it has one, and its data (one JSON text, or `[DONE]`). */
export interface SSEItem {
  event?: string;
  data: string;
}

/** A started run to answer as a chat completion (or on another `wire`). */
export interface RunAnswer {
  handle: RunHandle;
  /** The tracked run whose signal the handle got; ended once the response is complete. */
  run: TrackedRun;
  /** The completion's `id`: the run's id. */
  id: string;
  model: string;
  stream: boolean;
  includeUsage: boolean;
  /** The wire format; default chat completion chunks (`id`, `model`, `includeUsage`). */
  wire?: RunWire<unknown>;
  /**
   * Gives the run's session up; called once the run has stopped, before the last chunks go out
   * (so the client may continue the run at once), and again (idempotent) when the response ends.
   * Must not reject.
   */
  release?: () => Promise<void>;
  /** Whether the run is stored (then a run cut at shutdown stays resumable, and the client is told how). */
  stored?: boolean;
}

type Step = IteratorResult<AgentEvent, undefined>;
const HELD = Symbol("held");
const nothing = async () => {};

/** The chat completion wire (SPEC section 6): chunks, `data: [DONE]` last. */
function chatWire(a: RunAnswer): RunWire<unknown> {
  const typed = a.handle.state.outputSchema !== undefined;
  const mapper = new ChunkMapper(a.id, a.model, Math.floor(Date.now() / 1000), typed);
  return {
    map: (event) => mapper.map(event),
    open: () => [mapper.chunk({ role: "assistant", content: "" })],
    finish: (result, cut) => mapper.finish(result, a.includeUsage, cut),
    whole: (result) => mapper.completion(result, finishReason(result.stopReason) ?? "stop"),
    failed: (error) => [mapper.chunk({}, error, "stop")],
    sse: (chunk) => ({ data: JSON.stringify(chunk) }),
    last: "[DONE]",
  };
}

/** `wire` with every run error as a remote client may read it (`clientError`). */
function forClients(wire: RunWire<unknown>): RunWire<unknown> {
  return {
    map: (event) => wire.map(event.type === "error" ? clientError(event) : event),
    open: () => wire.open(),
    finish: (result, cut) =>
      wire.finish(result.error ? { ...result, error: clientError(result.error) } : result, cut),
    whole: (result) => wire.whole(result),
    failed: (error) => wire.failed(error),
    sse: (item) => wire.sse(item),
    ...(wire.last !== undefined && { last: wire.last }),
  };
}

/**
 * Answers a run like `POST /v1/chat/completions` (SPEC section 6), or on `a.wire`: a
 * `chat.completion`, or with `stream` Server-Sent Events of chunks ending with `data: [DONE]`; a
 * run that ends on an error stop before anything was streamed is an error answer (`runErrorResponse`:
 * a 502, or the model API's 4xx when the request was at fault). Ends the tracked run (and releases)
 * in every case.
 */
export async function answerRun(c: Context<ServerEnv>, deps: AnswerDeps, a: RunAnswer): Promise<Response> {
  const log = c.get("log");
  const release = a.release ?? nothing;
  const wire = forClients(a.wire ?? chatWire(a));
  const record = (result: RunResult) => {
    deps.metrics.record(a.model, result);
    if (!log) return;
    log.stopReason = result.stopReason;
    // What the client was not told (an internal address) is logged here, for the operator.
    if (result.error && withheld(result.error)) log.detail = deps.redact(result.error.message);
  };
  let handedOver = false;
  try {
    if (!a.stream) {
      try {
        for await (const event of a.handle) wire.map(event);
      } catch (error) {
        if (!(error instanceof StoreError)) throw error;
        const { status, message, code } = storeFailure(error, a.id);
        return errorResponse(status, deps.redact(message), code);
      }
      const result = await a.handle.result;
      await release();
      record(result);
      if (a.run.cut) {
        const cut = shutdownCut(a.id, a.stored === true);
        return errorResponse(503, cut.message, cut.code);
      }
      return finishReason(result.stopReason) === undefined
        ? runErrorResponse(result, deps.redact)
        : c.json(wire.whole(result));
    }

    // Hold the headers a moment, until the run has output: a run that fails at once is a 502.
    const { head, next, ended } = await firstOutput(a.handle, wire, deps.holdMs);
    if (ended && finishReason(ended.stopReason) === undefined) {
      await release();
      record(ended);
      return runErrorResponse(ended, deps.redact);
    }
    handedOver = true;
    log?.stream();
    return stream(c, { ...a, release, next, head, wire, record, log, deps });
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
  wire: RunWire<unknown>,
  holdMs: number,
): Promise<{ head: unknown[]; next: Promise<Step> | undefined; ended?: RunResult }> {
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
      const head = wire.map(step.value);
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
  /** Items mapped before the headers went. */
  head: unknown[];
  wire: RunWire<unknown>;
  record(result: RunResult): void;
  log: RequestLogEntry | undefined;
  deps: AnswerDeps;
}

/**
 * One message as SSE text. Its data is one JSON text, which has no line breaks: written as is, not
 * split into lines and joined again as hono's `writeSSE` does with any text.
 */
function sseText(message: SSEItem): string {
  return `${message.event ? `event: ${message.event}\n` : ""}data: ${message.data}\n\n`;
}

/**
 * The SSE response: the opening (a role chunk) at once, the mapped events as they come, the
 * closing items, then the wire's last message (`data: [DONE]`). Each write waits for the client to take the previous ones (backpressure),
 * so a slow reader slows its run instead of filling memory. Ends the tracked run.
 */
function stream(c: Context, s: StreamState): Response {
  c.header("x-accel-buffering", "no");
  return streamSSE(c, async (sse) => {
    sse.onAbort(s.run.abort);
    const keepAlive = setInterval(() => void sse.write(": keep-alive\n\n"), s.deps.keepAliveMs);
    keepAlive.unref();
    const send = (item: unknown) => sse.write(sseText(s.wire.sse(item)));
    let stopReason: string | undefined;
    try {
      for (const item of s.wire.open()) await send(item);
      for (const item of s.head) await send(item);
      let next = await (s.next ?? s.handle.next());
      while (!next.done) {
        for (const item of s.wire.map(next.value)) await send(item);
        next = await s.handle.next();
      }
      const result = await s.handle.result;
      await s.release();
      s.record(result);
      stopReason = result.stopReason;
      const cut = s.run.cut ? shutdownCut(result.runId, s.stored === true) : undefined;
      for (const item of s.wire.finish(result, cut)) await send(item);
    } catch (error) {
      // Not a model or tool failure (those end the run normally): a store that failed, a bug, or an onEvent hook that threw.
      s.run.abort();
      const { message, code } =
        error instanceof StoreError
          ? storeFailure(error, s.handle.runId)
          : { message: `Internal server error: ${errorMessage(error)}`, code: "internal_error" };
      const event: AgentEvent = {
        type: "error",
        message: s.deps.redact(message),
        code,
        runId: s.handle.runId,
      };
      stopReason = code;
      for (const item of s.wire.failed(event)) await send(item);
    } finally {
      clearInterval(keepAlive);
      await s.release();
      if (s.wire.last !== undefined) await sse.write(`data: ${s.wire.last}\n\n`);
      s.run.end();
      s.log?.end(stopReason);
    }
  });
}
