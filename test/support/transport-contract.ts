/**
 * The transport behaviour both model adapters share (src/models/request-guard.ts and
 * stream-retry.ts) as one set of tests, run by each adapter's test file against its own fake
 * server's fault modes: aborts, idle timeouts, refused and reset connections, and broken streams
 * requested again from scratch.
 */
import { type AddressInfo, createServer, type Socket } from "node:net";
import { afterEach, describe, expect, it, onTestFinished, vi } from "vitest";
import type { Model, ModelEvent } from "../../src/models/adapter.js";
import type { FakeFault, FakeRequest, FakeResponderOf } from "../../src/testing/fake-http.js";
import { collect, deltaText, done, errorOf, HI } from "./model-harness.js";

interface TransportOptions {
  baseURL: string;
  maxRetries?: number;
  timeoutMs?: number;
  retryPartialStreams?: boolean;
}

export interface AdapterUnderTest {
  /** Starts the adapter's fake server, closed after the test. */
  serve(respond: FakeResponderOf<{ text: string } | FakeFault>): Promise<{
    url: string;
    requests: FakeRequest[];
    close(): Promise<void>;
  }>;
  /** The adapter with a test key and these options (`maxRetries` 0 unless given). */
  model(options: TransportOptions): Model;
  /** The adapters' idle timeout, `DEFAULT_IDLE_TIMEOUT_MS` of request-guard.ts. */
  defaultIdleTimeoutMs: number;
  /** A raw event stream of the protocol's opening event only, which then ends: no delta, never complete. */
  openingOnly: string;
  /** Starts the adapter's fake server answering every request with `count` tool calls (each call's arguments over several chunks). */
  serveToolCalls(count: number): Promise<{ url: string }>;
}

/** A TCP server on 127.0.0.1 that accepts connections and never sends a byte; closed after the test. */
async function silentServer(): Promise<{ url: string; connections(): number }> {
  const sockets: Socket[] = [];
  const server = createServer((socket) => sockets.push(socket));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  onTestFinished(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise((resolve) => server.close(resolve));
  });
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, connections: () => sockets.length };
}

export function describeTransport(name: string, adapter: AdapterUnderTest): void {
  const { serve } = adapter;
  const run = (options: TransportOptions, onEvent?: (e: ModelEvent) => void, signal?: AbortSignal) =>
    collect(adapter.model({ maxRetries: 0, ...options }), HI, onEvent, signal);

  describe(`${name}: aborts, timeouts and broken connections`, () => {
    afterEach(() => {
      vi.useRealTimers();
    });

    it("ends with code aborted when the signal fires mid-stream, or before the request", async () => {
      const s = await serve(() => ({ stall: true, afterText: "Hello there" }));
      const controller = new AbortController();
      const onEvent = (e: ModelEvent) => e.type === "text_delta" && controller.abort();
      const events = await run({ baseURL: s.url }, onEvent, controller.signal);
      expect(errorOf(events)).toEqual({ code: "aborted", message: "Model request aborted" });
      const early = await run({ baseURL: s.url }, undefined, AbortSignal.abort());
      expect(errorOf(early).code).toBe("aborted");
      expect(s.requests).toHaveLength(1);
    });

    it("times out a stalled stream with code timeout", async () => {
      const s = await serve(() => ({ stall: true, afterText: "Hello" }));
      expect(errorOf(await run({ baseURL: s.url, timeoutMs: 200 })).code).toBe("timeout");
    });

    it("times out a stalled stream after the default idle timeout when timeoutMs is not set", async () => {
      expect(adapter.defaultIdleTimeoutMs).toBe(120_000);
      const s = await serve(() => ({ stall: true, afterText: "Hello" }));
      const model = adapter.model({ baseURL: s.url, maxRetries: 0 });
      const iterator = model.stream(HI, {})[Symbol.asyncIterator]();
      expect((await iterator.next()).value).toEqual({ type: "text_delta", text: "Hello" });
      // Only the adapter's timers are faked, from here on: the socket stays real and silent.
      vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
      const next = iterator.next();
      await vi.advanceTimersByTimeAsync(adapter.defaultIdleTimeoutMs);
      expect((await next).value).toEqual({
        type: "error",
        error: { code: "timeout", message: "Model API stream stalled: no data after 120000 ms" },
      });
      expect((await iterator.next()).done).toBe(true);
    });

    it("says once, in one line, that nothing is listening at a refused URL", async () => {
      const s = await serve([]);
      const url = s.url;
      await s.close();
      expect(errorOf(await run({ baseURL: url }))).toEqual({
        code: "connection",
        message: `Nothing is listening at ${url} (connection refused): start the server or fix the base URL (--base-url).`,
      });
    });

    it("times out a server that accepts the connection and never answers, after timeoutMs", async () => {
      const hang = await silentServer();
      const error = errorOf(await run({ baseURL: hang.url, timeoutMs: 200 }));
      expect(error).toEqual({ code: "timeout", message: "Model API request timed out after 200 ms" });
      expect(hang.connections()).toBe(1);
    });

    it("waits for the response headers no longer than the default idle timeout", async () => {
      const hang = await silentServer();
      // Only timers are faked, before the request starts: the socket stays real and silent.
      vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
      const model = adapter.model({ baseURL: hang.url, maxRetries: 0 });
      const next = model.stream(HI, {})[Symbol.asyncIterator]().next();
      await vi.waitFor(() => expect(hang.connections()).toBe(1), { interval: 5 });
      await vi.advanceTimersByTimeAsync(adapter.defaultIdleTimeoutMs);
      expect((await next).value).toEqual({
        type: "error",
        error: { code: "timeout", message: "Model API request timed out after 120000 ms" },
      });
    });

    it("ends at once when the signal fires while waiting for the response headers", async () => {
      const hang = await silentServer();
      const controller = new AbortController();
      const pending = run({ baseURL: hang.url }, undefined, controller.signal);
      await vi.waitFor(() => expect(hang.connections()).toBe(1), { interval: 5 });
      controller.abort();
      expect(errorOf(await pending)).toEqual({ code: "aborted", message: "Model request aborted" });
    });

    it("retries a connection reset before the headers, and reports a persistent one as connection", async () => {
      const s = await serve([{ reset: true }, { text: "ok" }]);
      expect(done(await run({ baseURL: s.url, maxRetries: 1 })).content).toBe("ok");
      const failed = await serve(() => ({ reset: true }));
      expect(errorOf(await run({ baseURL: failed.url, maxRetries: 1 })).code).toBe("connection");
      expect(failed.requests).toHaveLength(2);
    });
  });

  describe(`${name}: broken streams`, () => {
    it("requests a stream cut, or ended early, before any delta again from scratch", async () => {
      const s = await serve([{ cutMidChunk: true }, { raw: adapter.openingOnly }, { text: "Whole answer." }]);
      const events = await run({ baseURL: s.url, maxRetries: 2 });
      expect(done(events).content).toBe("Whole answer.");
      expect(deltaText(events, "text_delta")).toBe("Whole answer.");
      expect(s.requests).toHaveLength(3);
      expect(s.requests[2]?.body).toEqual(s.requests[0]?.body);
    });

    it("ends with stream_incomplete once deltas were emitted; retryPartialStreams retries those too", async () => {
      const cut = { cutMidChunk: true, afterText: "Partial answer" } as const;
      const s = await serve([cut, cut, { text: "Full answer." }]);
      const partial = await run({ baseURL: s.url, maxRetries: 3 });
      expect(errorOf(partial).code).toBe("stream_incomplete");
      expect(errorOf(partial).message).toMatch(/^Model API stream broke off before the reply was complete/);
      expect(deltaText(partial, "text_delta")).toBe("Partial answer");
      expect(s.requests).toHaveLength(1);
      const retried = await run({ baseURL: s.url, maxRetries: 3, retryPartialStreams: true });
      expect(deltaText(retried, "text_delta")).toBe("Partial answerFull answer.");
      expect(done(retried).content).toBe("Full answer.");
      expect(s.requests).toHaveLength(3);
    });

    it("gives up on a stream that keeps breaking after 1 + maxRetries requests", async () => {
      const s = await serve(() => ({ breakOff: true }));
      expect(errorOf(await run({ baseURL: s.url, maxRetries: 2 })).code).toBe("stream_incomplete");
      expect(s.requests).toHaveLength(3);
    });
  });

  describe(`${name}: what a request costs`, () => {
    afterEach(() => {
      vi.restoreAllMocks();
    });

    it("leaves a response read to its end alone, and aborts one left early (releasing its connection)", async () => {
      // The client's fetch is the global one, taken when the adapter creates its client.
      const fetches = vi.spyOn(globalThis, "fetch");
      const s = await serve(() => ({ text: "Hello there" }));
      const model = adapter.model({ baseURL: s.url, maxRetries: 0 });
      expect(deltaText(await collect(model, HI), "text_delta")).toBe("Hello there");
      for await (const event of model.stream(HI, {})) if (event.type === "text_delta") break;
      const [whole, left] = fetches.mock.calls.map(([, init]) => init?.signal);
      expect(whole?.aborted).toBe(false);
      expect(left?.aborted).toBe(true);
    });

    it("restarts one idle timer as chunks stream in, rather than arming a timer per chunk", async () => {
      const s = await adapter.serveToolCalls(6);
      const model = adapter.model({ baseURL: s.url, maxRetries: 0 });
      await collect(model, HI); // the client and its connection, set up
      const timers = vi.spyOn(globalThis, "setTimeout");
      expect(done(await collect(model, HI)).toolCalls).toHaveLength(6); // some 60 chunks
      expect(timers.mock.calls.length).toBeLessThan(10);
    });

    it("maps each message of a history to the wire once, however many requests carry it", async () => {
      const s = await serve(() => ({ text: "ok" }));
      const model = adapter.model({ baseURL: s.url, maxRetries: 0 });
      let reads = 0;
      const question = {
        role: "user" as const,
        get content() {
          reads++;
          return "hi";
        },
      };
      const request = { ...HI, messages: [question] };
      await collect(model, request);
      const once = reads;
      await collect(model, request);
      const more = { role: "user" as const, content: "and?" };
      await collect(model, { ...request, messages: [question, { role: "assistant", content: "ok" }, more] });
      expect(once).toBeGreaterThan(0);
      expect(reads).toBe(once);
      expect(s.requests[1]?.body).toEqual(s.requests[0]?.body);
    });
  });
}
