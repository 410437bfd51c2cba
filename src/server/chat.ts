import { randomUUID } from "node:crypto";
import type { Context } from "hono";
import { streamSSE } from "hono/streaming";
import type { Agent } from "../core/agent.js";
import { errorMessage } from "../core/errors.js";
import type { AgentEvent, RunResult } from "../core/events.js";
import { errorResponse, finishReason, runErrorResponse } from "./errors.js";
import { type Chunk, ChunkMapper } from "./map-events.js";
import type { Metrics } from "./metrics.js";
import { chatRequestSchema, describeRequestIssue, toRunInput } from "./openai-compat.js";
import type { RunTracker, TrackedRun } from "./runs.js";

/** What the chat completions endpoint needs from the app. */
export interface ChatDeps {
  agents: Readonly<Record<string, Agent>>;
  /** The model id of a request without `model`. */
  defaultModel: string;
  metrics: Metrics;
  runs: RunTracker;
}

/** A comment line every so often keeps proxies from closing a stream while a long tool runs. */
const KEEP_ALIVE_MS = 15_000;
const JSON_TYPE = /^application\/(?:[\w.+-]+\+)?json\s*(?:;|$)/i;

type Step = IteratorResult<AgentEvent, RunResult>;

/**
 * `POST /v1/chat/completions` (SPEC section 6), after auth, the body limit and the draining
 * check. Order of checks: content type and JSON (400), schema and conversation (400), then
 * the model (404). The run is aborted when the client disconnects, streaming or not.
 */
export async function chatCompletions(c: Context, deps: ChatDeps): Promise<Response> {
  // A JSON content type forces a CORS preflight, so a web page elsewhere cannot start runs.
  if (!JSON_TYPE.test(c.req.header("content-type") ?? "")) {
    return errorResponse(
      400,
      "Send the request body as JSON with Content-Type: application/json.",
      "invalid_content_type",
    );
  }
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
  const agent = Object.hasOwn(deps.agents, model) ? deps.agents[model] : undefined;
  if (!agent) {
    const message = `The model '${model}' does not exist: GET /v1/models lists the served agents.`;
    return errorResponse(404, message, "model_not_found", { param: "model" });
  }

  const run = deps.runs.start(c.req.raw.signal);
  let handedOver = false;
  try {
    const events = agent.stream(input.input, {
      signal: run.signal,
      history: input.history,
      ...(input.instructions !== "" && { instructions: input.instructions }),
    });
    const mapper = new ChunkMapper(`chatcmpl-${randomUUID()}`, model, Math.floor(Date.now() / 1000));
    const record = (result: RunResult) => deps.metrics.record(model, result);

    if (!request.stream) {
      let next = await events.next();
      while (!next.done) {
        mapper.map(next.value);
        next = await events.next();
      }
      record(next.value);
      const reason = finishReason(next.value.stopReason);
      return reason === undefined
        ? runErrorResponse(next.value)
        : c.json(mapper.completion(next.value, reason));
    }

    // Hold the response until there is something to send, so a run that fails first is a 502.
    let next = await events.next();
    let head: Chunk[] = [];
    while (!next.done) {
      head = mapper.map(next.value);
      if (head.length > 0) break;
      next = await events.next();
    }
    if (next.done && finishReason(next.value.stopReason) === undefined) {
      record(next.value);
      return runErrorResponse(next.value);
    }
    handedOver = true;
    const includeUsage = request.stream_options?.include_usage === true;
    return stream(c, { run, events, first: next, head, mapper, includeUsage, record });
  } finally {
    if (!handedOver) run.end();
  }
}

interface StreamState {
  run: TrackedRun;
  events: AsyncGenerator<AgentEvent, RunResult>;
  /** The last step read: an event already mapped into `head`, or the run's end. */
  first: Step;
  head: Chunk[];
  mapper: ChunkMapper;
  includeUsage: boolean;
  record(result: RunResult): void;
}

/**
 * The SSE response: a role chunk, the mapped events as they come, the closing chunks, then
 * `data: [DONE]`. Each write waits for the client to take the previous ones (backpressure),
 * so a slow reader slows its run instead of filling memory. Ends the tracked run.
 */
function stream(c: Context, s: StreamState): Response {
  c.header("x-accel-buffering", "no");
  return streamSSE(c, async (sse) => {
    sse.onAbort(s.run.abort);
    const keepAlive = setInterval(() => void sse.write(": keep-alive\n\n"), KEEP_ALIVE_MS);
    keepAlive.unref();
    const send = (chunk: Chunk) => sse.writeSSE({ data: JSON.stringify(chunk) });
    try {
      await send(s.mapper.chunk({ role: "assistant", content: "" }));
      for (const chunk of s.head) await send(chunk);
      let next = s.first;
      while (!next.done) {
        next = await s.events.next();
        if (!next.done) for (const chunk of s.mapper.map(next.value)) await send(chunk);
      }
      s.record(next.value);
      for (const chunk of s.mapper.finish(next.value, s.includeUsage)) await send(chunk);
    } catch (error) {
      // Not a model or tool failure (those end the run normally): a bug, or an onEvent hook that threw.
      s.run.abort();
      const event: AgentEvent = {
        type: "error",
        message: `Internal server error: ${errorMessage(error)}`,
        code: "internal_error",
      };
      await send(s.mapper.chunk({}, event, "stop"));
    } finally {
      clearInterval(keepAlive);
      await sse.writeSSE({ data: "[DONE]" });
      s.run.end();
    }
  });
}
