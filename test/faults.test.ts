/**
 * Model API faults through the library: an Agent on `openAIChatModel` against the fake server's
 * fault modes. Every fault ends the run with a stop reason (`final_answer` after recovery, else
 * `model_error`), and the API key never appears in an event, an error or the result.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { Agent } from "../src/agent/agent.js";
import type { AgentEvent, RunResult } from "../src/core/events.js";
import type { ModelEvent } from "../src/models/adapter.js";
import { type OpenAIChatModelOptions, openAIChatModel } from "../src/models/openai-chat.js";
import { DEFAULT_IDLE_TIMEOUT_MS } from "../src/models/request-guard.js";
import {
  type FakeOpenAIServer,
  type FakeResponder,
  startFakeOpenAIServer,
} from "../src/testing/fake-openai-server.js";

const SECRET = "sk-proj-SECRET-5c2f9e0d1b7a";
let server: FakeOpenAIServer | undefined;

afterEach(async () => {
  vi.useRealTimers();
  await server?.close();
  server = undefined;
});

interface FaultRun {
  result: RunResult;
  events: AgentEvent[];
  server: FakeOpenAIServer;
}

/** Runs an Agent against `respond` and checks what every fault must satisfy. */
async function run(respond: FakeResponder, options: Partial<OpenAIChatModelOptions> = {}): Promise<FaultRun> {
  server = await startFakeOpenAIServer({ respond });
  const events: AgentEvent[] = [];
  const model = openAIChatModel({ model: "gpt-4o-mini", baseURL: server.url, apiKey: SECRET, ...options });
  const result = await new Agent({ model, onEvent: (e) => events.push(e) }).run("hi");
  expect(events.at(-1)).toMatchObject({ type: "turn_complete", stopReason: result.stopReason });
  expect(JSON.stringify({ events, result })).not.toMatch(/SECRET|5c2f9e0d1b7a/);
  if (result.stopReason === "model_error") {
    expect(result.error?.message).not.toContain("\n");
    expect(events.filter((e) => e.type === "error")).toEqual([
      { type: "error", ...result.error, runId: result.runId },
    ]);
  }
  return { result, events, server };
}

const deltas = (events: AgentEvent[]) =>
  events.map((e) => (e.type === "message_delta" ? e.text : "")).join("");

/** A proxy's error page that even echoes the request's credentials. */
const NGINX_502 = `<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n<!-- Authorization: Bearer ${SECRET} -->\r\n<hr><center>nginx/1.25.3</center>\r\n</body>\r\n</html>\r\n`;
const html502 = {
  status: 502,
  headers: { "content-type": "text/html", "retry-after-ms": "1" },
  body: NGINX_502,
};

describe("rate limits and server errors", () => {
  it("waits out a 429 with Retry-After in seconds, then succeeds", async () => {
    const { result, server } = await run([{ status: 429, headers: { "retry-after": "1" } }, { text: "ok" }]);
    expect(result).toMatchObject({ stopReason: "final_answer", output: "ok" });
    expect(server.requests).toHaveLength(2);
    // The client's own retry of the same request, not a new call by the loop.
    expect(server.requests[1]?.headers["x-stainless-retry-count"]).toBe("1");
  });

  it("waits out a 429 with Retry-After as an HTTP date, then succeeds", async () => {
    const date = new Date(Date.now() + 1000).toUTCString();
    const { result, server } = await run([{ status: 429, headers: { "retry-after": date } }, { text: "ok" }]);
    expect(result).toMatchObject({ stopReason: "final_answer", output: "ok" });
    expect(server.requests[1]?.headers["x-stainless-retry-count"]).toBe("1");
  });

  it("retries a 500 twice, then succeeds", async () => {
    const error = { status: 500, headers: { "retry-after-ms": "1" } };
    const { result, server } = await run([error, error, { text: "recovered" }]);
    expect(result).toMatchObject({ stopReason: "final_answer", output: "recovered" });
    expect(server.requests).toHaveLength(3);
  });

  it("retries a proxy's HTML 502 page, then summarises it in one line without the markup", async () => {
    const recovered = await run([html502, html502, { text: "ok" }]);
    expect(recovered.result).toMatchObject({ stopReason: "final_answer", output: "ok" });
    const failed = await run(() => html502, { maxRetries: 1 });
    expect(failed.result).toMatchObject({ stopReason: "model_error", output: "" });
    expect(failed.result.error).toEqual({
      code: "http_502",
      message: "Model API error (HTTP 502): Bad Gateway (an HTML page, probably from a proxy)",
    });
    expect(failed.server.requests).toHaveLength(2);
  });

  it("reports a 200 HTML page for a streaming or a plain request as invalid_response, without retrying", async () => {
    const page = `<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>Sign in &amp; continue</title></head><body>token: ${SECRET}</body></html>`;
    const portal = { raw: page, headers: { "content-type": "text/html; charset=utf-8" } };
    for (const stream of [true, false]) {
      const { result, server } = await run(() => portal, { stream });
      expect(result).toMatchObject({ stopReason: "model_error", error: { code: "invalid_response" } });
      expect(result.error?.message).toContain("an HTML page (Sign in & continue)");
      expect(server.requests).toHaveLength(1);
    }
  });
});

describe("broken connections and streams", () => {
  it("retries a connection reset before the headers, and reports a persistent one as connection", async () => {
    const recovered = await run([{ reset: true }, { text: "ok" }], { maxRetries: 1 });
    expect(recovered.result).toMatchObject({ stopReason: "final_answer", output: "ok" });
    const failed = await run(() => ({ reset: true }), { maxRetries: 1 });
    expect(failed.result).toMatchObject({ stopReason: "model_error", error: { code: "connection" } });
    expect(failed.result.error?.message).toMatch(/^Model API connection error: .*other side closed/);
    expect(failed.server.requests).toHaveLength(2);
  });

  it("requests a stream cut mid-chunk again when nothing was emitted yet", async () => {
    const { result, events, server } = await run([{ cutMidChunk: true }, { text: "Whole answer." }]);
    expect(result).toMatchObject({ stopReason: "final_answer", output: "Whole answer." });
    expect(deltas(events)).toBe("Whole answer.");
    expect(server.requests).toHaveLength(2);
    expect(server.requests[1]?.body).toEqual(server.requests[0]?.body);
  });

  it("ends with model_error when a stream is cut after deltas were emitted", async () => {
    const { result, events, server } = await run([{ cutMidChunk: true, afterText: "Partial answer" }]);
    expect(result).toMatchObject({ stopReason: "model_error", error: { code: "stream_incomplete" } });
    expect(result.error?.message).toMatch(/^Model API stream broke off before the reply was complete/);
    expect(deltas(events)).toBe("Partial answer");
    expect(server.requests).toHaveLength(1);
  });

  it("with retryPartialStreams, retries it too: deltas may repeat, the message holds only the retry's reply", async () => {
    const { result, events } = await run(
      [{ cutMidChunk: true, afterText: "Partial answer" }, { text: "Full answer." }],
      {
        retryPartialStreams: true,
      },
    );
    expect(result).toMatchObject({ stopReason: "final_answer", output: "Full answer." });
    expect(deltas(events)).toBe("Partial answerFull answer.");
    expect(events.filter((e) => e.type === "message")).toMatchObject([
      { type: "message", content: "Full answer." },
    ]);
    expect(result.messages.at(-1)).toEqual({ role: "assistant", content: "Full answer." });
  });

  it("gives up on a stream that keeps breaking after 1 + maxRetries requests", async () => {
    const { result, server } = await run(() => ({ cutMidChunk: true }), { maxRetries: 2 });
    expect(result).toMatchObject({ stopReason: "model_error", error: { code: "stream_incomplete" } });
    expect(server.requests).toHaveLength(3);
  });

  it("times out a stalled stream after timeoutMs of silence", async () => {
    const { result } = await run(() => ({ stall: true, afterText: "Let me" }), { timeoutMs: 150 });
    expect(result).toMatchObject({ stopReason: "model_error", output: "" });
    expect(result.error).toEqual({
      code: "timeout",
      message: "Model API stream stalled: no data after 150 ms",
    });
  });

  it("times out a stalled stream after the default idle timeout when timeoutMs is not set", async () => {
    expect(DEFAULT_IDLE_TIMEOUT_MS).toBe(120_000);
    server = await startFakeOpenAIServer({ respond: () => ({ stall: true, afterText: "Hello" }) });
    const model = openAIChatModel({ model: "m", baseURL: server.url, apiKey: SECRET, maxRetries: 0 });
    const events = model.stream({ system: "", messages: [{ role: "user", content: "hi" }], tools: [] }, {});
    const iterator = events[Symbol.asyncIterator]();
    expect((await iterator.next()).value).toEqual({ type: "text_delta", text: "Hello" });
    // Only the adapter's timers are faked, from here on: the socket stays real and silent.
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    const next = iterator.next();
    await vi.advanceTimersByTimeAsync(DEFAULT_IDLE_TIMEOUT_MS);
    const error: ModelEvent = (await next).value;
    expect(error).toEqual({
      type: "error",
      error: { code: "timeout", message: "Model API stream stalled: no data after 120000 ms" },
    });
    expect((await iterator.next()).done).toBe(true);
  });
});

describe("malformed streams", () => {
  it("ignores an SSE line without a colon and an unknown event name with data", async () => {
    for (const inject of ["data {oops\n\n", "event: garbage\n"]) {
      const { result } = await run([{ text: "Still fine.", inject }]);
      expect(result).toMatchObject({ stopReason: "final_answer", output: "Still fine." });
    }
  });

  it("reports an event line without data, or invalid JSON in a chunk, as invalid_response", async () => {
    const bad = 'data: {"choices":[{"index":0,"delta":{"content":"Hi"}}\n\n';
    for (const r of [{ text: "Hello", inject: "event: garbage\n\n" }, { raw: `${bad}data: [DONE]\n\n` }]) {
      const { result, server } = await run(() => r);
      expect(result).toMatchObject({ stopReason: "model_error", error: { code: "invalid_response" } });
      expect(result.error?.message).toBe(
        "Model API returned an invalid response: Error reading response: malformed server-sent event JSON.",
      );
      expect(server.requests).toHaveLength(1);
    }
  });
});
