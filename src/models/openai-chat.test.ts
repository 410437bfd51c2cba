/** The adapter over real HTTP against the fake server: request mapping, retries, faults, aborts. */
import { afterEach, describe, expect, it, vi } from "vitest";
import {
  call,
  collect as collectEvents,
  deltaText,
  done,
  errorOf,
  fakeServerPerTest,
  HI as request,
} from "../../test/support/model-harness.js";
import { describeTransport } from "../../test/support/transport-contract.js";
import type { Message } from "../core/messages.js";
import { redactSecrets } from "../core/redact.js";
import { startFakeOpenAIServer } from "../testing/fake-openai-server.js";
import type { ModelEvent, ModelRequest } from "./adapter.js";
import { type OpenAIChatModelOptions, openAIChatModel } from "./openai-chat.js";
import { toChatMessages } from "./openai-wire.js";
import { DEFAULT_IDLE_TIMEOUT_MS } from "./request-guard.js";

const serve = fakeServerPerTest(startFakeOpenAIServer);

afterEach(() => {
  vi.unstubAllEnvs();
});

/** Collects every event and checks the adapter contract: deltas, then exactly one terminal event. */
const collect = (
  options: Partial<OpenAIChatModelOptions>,
  ...rest: [req?: ModelRequest, onEvent?: (e: ModelEvent) => void, signal?: AbortSignal]
) =>
  collectEvents(
    openAIChatModel({ model: "test-model", apiKey: "sk-test-key-0000", maxRetries: 0, ...options }),
    ...rest,
  );

describe("redactSecrets", () => {
  it("removes the configured secret verbatim, sk- keys, and bearer credentials", () => {
    const text =
      "key my-gateway-token-42 and sk-proj-****abcd, sk-live_AbC123xyz; Authorization: Bearer abc.def task-list";
    const out = redactSecrets(text, ["my-gateway-token-42", "", "x"]);
    expect(out).not.toContain("my-gateway-token-42");
    expect(out).not.toMatch(/sk-proj|AbC123|abc\.def/);
    expect(out).toContain("task-list");
    expect(out).toContain("Bearer [REDACTED]");
  });
});

describe("openAIChatModel over HTTP", () => {
  it("maps messages and tools to the wire, and sends headers, stream_options and extraBody", async () => {
    const s = await serve([{ text: "ok" }, { text: "again" }]);
    const req: ModelRequest = {
      system: "Be brief.",
      messages: [
        { role: "user", content: "weather?" },
        { role: "assistant", content: "", toolCalls: [call("c1", "get_weather", '{"city":"Oslo"}')] },
        { role: "tool", toolCallId: "c1", name: "get_weather", content: "sunny", isError: false },
        { role: "assistant", content: "It is sunny." },
      ],
      tools: [
        { name: "get_weather", description: "Weather", parameters: { type: "object", properties: {} } },
      ],
    };
    const options = { baseURL: s.url, headers: { "x-team": "qa" }, extraBody: { temperature: 0.2 } };
    done(await collect(options, req));
    done(await collect(options, { ...req, system: "", tools: [] }));
    const [first, second] = s.requests;
    expect(first?.body).toEqual({
      model: "test-model",
      messages: [
        { role: "system", content: "Be brief." },
        { role: "user", content: "weather?" },
        {
          role: "assistant",
          content: null,
          tool_calls: [
            { id: "c1", type: "function", function: { name: "get_weather", arguments: '{"city":"Oslo"}' } },
          ],
        },
        { role: "tool", tool_call_id: "c1", content: "sunny" },
        { role: "assistant", content: "It is sunny." },
      ],
      tools: [
        {
          type: "function",
          function: {
            name: "get_weather",
            description: "Weather",
            parameters: { type: "object", properties: {} },
          },
        },
      ],
      stream: true,
      stream_options: { include_usage: true },
      temperature: 0.2,
    });
    expect(first?.headers.authorization).toBe("Bearer sk-test-key-0000");
    expect(first?.headers["x-team"]).toBe("qa");
    expect(second?.body.messages[0]).toEqual({ role: "user", content: "weather?" });
    expect(second?.body).not.toHaveProperty("tools");
  });

  it("sends a growing history the same as mapped afresh, whatever changed in between", async () => {
    const s = await serve([{ text: "1" }, { text: "2" }, { text: "3" }, { text: "4" }]);
    const model = openAIChatModel({ model: "test-model", apiKey: "sk-test-key-0000", baseURL: s.url });
    const history: Message[] = [{ role: "user", content: "weather?" }];
    const tools: ModelRequest["tools"] = [];
    const ask = async (system: string) =>
      done(await collectEvents(model, { system, messages: history, tools }));
    await ask("Be brief.");
    history.push(
      { role: "assistant", content: "", toolCalls: [call("c1", "get_weather", '{"city":"Oslo"}')] },
      { role: "tool", toolCallId: "c1", name: "get_weather", content: "sunny", isError: false },
    );
    await ask("Be brief. Only 1 iteration remains."); // grown, and a new system prompt
    history.push({ role: "assistant", content: "It is sunny." }, { role: "user", content: "and tomorrow?" });
    await ask(""); // no system prompt at all
    await ask("Be brief.");
    const fresh = (system: string, upTo: number) => toChatMessages(system, history.slice(0, upTo));
    expect(s.requests.map((r) => r.body.messages)).toEqual([
      fresh("Be brief.", 1),
      fresh("Be brief. Only 1 iteration remains.", 3),
      fresh("", 5),
      fresh("Be brief.", 5),
    ]);
  });

  it("streams a scripted reply with reasoning, text and two tool calls", async () => {
    const s = await serve([
      {
        reasoning: "Think first.",
        text: "Calling two tools now.",
        toolCalls: [
          { id: "a", name: "read", arguments: { path: "README.md", lines: [1, 20] } },
          { name: "ls", arguments: "{}" },
        ],
        usage: { inputTokens: 12, outputTokens: 7, cachedInputTokens: 4 },
      },
    ]);
    const events = await collect({ baseURL: s.url });
    expect(events.filter((e) => e.type === "text_delta").length).toBeGreaterThan(1);
    expect(done(events)).toEqual({
      id: "chatcmpl-fake-0",
      model: "test-model",
      content: "Calling two tools now.",
      thinking: "Think first.",
      toolCalls: [call("a", "read", '{"path":"README.md","lines":[1,20]}'), call("call_0_1", "ls", "{}")],
      finishReason: "tool_calls",
      usage: { inputTokens: 12, outputTokens: 7, cachedInputTokens: 4 },
    });
  });

  it("retries a 429 with retry-after-ms, then succeeds", async () => {
    const s = await serve([{ status: 429, headers: { "retry-after-ms": "1" } }, { text: "ok" }]);
    const events = await collect({ baseURL: s.url, maxRetries: 3 });
    expect(done(events).content).toBe("ok");
    expect(events.filter((e) => e.type === "error")).toHaveLength(0);
    expect(s.requests).toHaveLength(2);
  });

  it("gives up on a persistent 500 after 1 + maxRetries requests (default 3)", async () => {
    const s = await serve(() => ({ status: 500, headers: { "retry-after-ms": "1" } }));
    const model = openAIChatModel({ model: "m", apiKey: "sk-test-key-0000", baseURL: s.url });
    const events: ModelEvent[] = [];
    for await (const e of model.stream(request, {})) events.push(e);
    expect(errorOf(events)).toMatchObject({ code: "http_500", status: 500 });
    expect(errorOf(events).message).toMatch(/^Model API error \(HTTP 500\): /);
    expect(s.requests).toHaveLength(4);
  });

  it("does not retry a 400", async () => {
    const body = JSON.stringify({
      error: { message: "Invalid 'messages': empty.", type: "invalid_request_error" },
    });
    const s = await serve(() => ({ status: 400, body }));
    const error = errorOf(await collect({ baseURL: s.url, maxRetries: 3 }));
    expect(error).toEqual({
      code: "http_400",
      status: 400,
      message: "Model API error (HTTP 400): Invalid 'messages': empty.",
    });
    expect(s.requests).toHaveLength(1);
  });

  it("never puts the API key in a 401 message", async () => {
    const key = "sk-proj-SECRET1234567890abcdefXYZ";
    const body = JSON.stringify({
      error: {
        message: `Incorrect API key provided: ${key} (sk-proj-********XYZ).\nAuthorization: Bearer ${key}`,
      },
    });
    const s = await serve(() => ({ status: 401, body }));
    const error = errorOf(await collect({ baseURL: s.url, apiKey: key, maxRetries: 3 }));
    expect(error.code).toBe("http_401");
    expect(error.message).toMatch(/^Model API error \(HTTP 401\): Incorrect API key provided/);
    expect(error.message).not.toMatch(/SECRET|\*\*\*\*XYZ|\n/);
    expect(s.requests).toHaveLength(1);
  });

  it("redacts a non-sk key and a credential header echoed by a gateway", async () => {
    const key = "gateway-token-7f3a9c";
    const s = await serve(() => ({ status: 403, body: `forbidden for token ${key} / dial-key-42x` }));
    const headers = { "api-key": "dial-key-42x" };
    const error = errorOf(await collect({ baseURL: s.url, apiKey: key, headers }));
    expect(error).toMatchObject({ code: "http_403", status: 403 });
    expect(error.message).not.toMatch(/7f3a9c|dial-key/);
    expect(s.requests[0]?.headers["api-key"]).toBe("dial-key-42x");
  });

  it("reports a stream that breaks off or ends without a finish_reason as stream_incomplete, a JSON body as invalid_response", async () => {
    const s = await serve([
      { breakOff: true, afterText: "Partial answer" },
      { raw: 'data: {"choices":[{"index":0,"delta":{"content":"Hi"}}]}\n\n' },
      { raw: '{"choices":[{"index":0,"message":{"content":"Hi"},"finish_reason":"stop"}]}' },
    ]);
    const broken = await collect({ baseURL: s.url });
    expect(deltaText(broken, "text_delta")).toBe("Partial answer");
    expect(errorOf(broken).code).toBe("stream_incomplete");
    const ended = await collect({ baseURL: s.url });
    expect(errorOf(ended).code).toBe("stream_incomplete");
    const json = errorOf(await collect({ baseURL: s.url }));
    expect(json).toMatchObject({
      code: "invalid_response",
      message: expect.stringContaining("try stream: false"),
    });
    expect(s.requests).toHaveLength(3);
  });

  it("summarises an HTML error page by its title, else its first heading", async () => {
    const s = await serve([
      { status: 504, body: "<html><head><title>504 Gateway Time-out</title></head><body>...</body></html>" },
      {
        status: 503,
        body: "<!DOCTYPE html>\n<html><body><h1>Service &amp; API\n unavailable</h1></body></html>",
      },
      { status: 502, headers: { "content-type": "text/html" }, body: "<p>upstream error</p>" },
    ]);
    const messages = [];
    for (let i = 0; i < 3; i++) messages.push(errorOf(await collect({ baseURL: s.url })).message);
    expect(messages).toEqual([
      "Model API error (HTTP 504): Gateway Time-out (an HTML page, probably from a proxy)",
      "Model API error (HTTP 503): Service & API unavailable (an HTML page, probably from a proxy)",
      "Model API error (HTTP 502): no title (an HTML page, probably from a proxy)",
    ]);
  });

  it("reports malformed stream JSON as invalid_response", async () => {
    const s = await serve([{ raw: "data: {not json\n\ndata: [DONE]\n\n" }]);
    expect(errorOf(await collect({ baseURL: s.url })).code).toBe("invalid_response");
  });

  it("supports non-streaming mode", async () => {
    const s = await serve([
      { text: "Plain answer.", toolCalls: [{ id: "t1", name: "ls", arguments: "{}" }] },
    ]);
    const events = await collect({ baseURL: s.url, stream: false });
    expect(events.map((e) => e.type)).toEqual(["text_delta", "done"]);
    expect(done(events)).toMatchObject({ content: "Plain answer.", toolCalls: [call("t1", "ls", "{}")] });
    expect(s.requests[0]?.body.stream).toBe(false);
  });

  it("without a key: a placeholder for a base URL, else a missing_api_key error", async () => {
    vi.stubEnv("OPENAI_API_KEY", "");
    vi.stubEnv("OPENAI_BASE_URL", "");
    const s = await serve([{ text: "local" }]);
    expect(done(await collect({ baseURL: s.url, apiKey: undefined })).content).toBe("local");
    expect(s.requests[0]?.headers.authorization).toBe("Bearer not-needed");
    const error = errorOf(await collect({ apiKey: undefined }));
    expect(error.code).toBe("missing_api_key");
    expect(error.message).toContain("OPENAI_API_KEY");
  });
});

describeTransport("openAIChatModel", {
  serve,
  model: (options) => openAIChatModel({ model: "test-model", apiKey: "sk-test-key-0000", ...options }),
  defaultIdleTimeoutMs: DEFAULT_IDLE_TIMEOUT_MS,
  openingOnly:
    'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}\n\n',
  serveToolCalls: (count) =>
    serve(() => ({
      toolCalls: Array.from({ length: count }, (_, i) => ({
        name: "f",
        arguments: { text: "x".repeat(40 + i) },
      })),
    })),
});
