/** The Anthropic adapter over real HTTP against the fake server: request wire, retries, faults, aborts. */
import Anthropic from "@anthropic-ai/sdk";
import { afterEach, describe, expect, it, vi } from "vitest";
import {
  collect as collectEvents,
  deltaText,
  done,
  errorOf,
  fakeServerPerTest,
  HI as request,
} from "../../test/support/model-harness.js";
import { describeTransport } from "../../test/support/transport-contract.js";
import { startFakeAnthropicServer } from "../testing/fake-anthropic-server.js";
import type { ModelEvent, ModelRequest } from "./adapter.js";
import { type AnthropicModelOptions, anthropicModel } from "./anthropic.js";
import { DEFAULT_IDLE_TIMEOUT_MS } from "./request-guard.js";

const KEY = "sk-ant-api03-test-key-0000";
const serve = fakeServerPerTest(startFakeAnthropicServer);

afterEach(() => {
  vi.unstubAllEnvs();
});

/** Collects every event and checks the adapter contract: deltas, then exactly one terminal event. */
const collect = (
  options: Partial<AnthropicModelOptions>,
  ...rest: [req?: ModelRequest, onEvent?: (e: ModelEvent) => void, signal?: AbortSignal]
) => collectEvents(anthropicModel({ model: "claude-test", apiKey: KEY, maxRetries: 0, ...options }), ...rest);

describe("anthropicModel over HTTP", () => {
  it("sends the Messages wire: top-level system, tools with input_schema, headers, thinking, extraBody", async () => {
    const s = await serve([{ text: "ok" }, { text: "again" }]);
    const req: ModelRequest = {
      system: "Be brief.",
      messages: [
        { role: "user", content: "weather in Oslo and Rome?" },
        {
          role: "assistant",
          content: "",
          thinking: "Two cities.",
          thinkingSignature: "sig-abc",
          toolCalls: [
            { id: "c1", name: "get_weather", arguments: '{"city":"Oslo"}' },
            { id: "c2", name: "get_weather", arguments: '{"city":"Rome"}' },
          ],
        },
        { role: "tool", toolCallId: "c1", name: "get_weather", content: "sunny", isError: false },
        { role: "tool", toolCallId: "c2", name: "get_weather", content: "timeout", isError: true },
      ],
      tools: [
        { name: "get_weather", description: "Weather", parameters: { type: "object", properties: {} } },
      ],
    };
    const options = {
      baseURL: s.url,
      headers: { "x-team": "qa" },
      thinking: { budgetTokens: 1024 },
      extraBody: { temperature: 1 },
    };
    done(await collect(options, req));
    done(await collect({ baseURL: s.url }, { ...req, system: "", tools: [] }));
    const [first, second] = s.requests;
    expect(first?.path).toBe("/v1/messages");
    expect(first?.body).toEqual({
      model: "claude-test",
      max_tokens: 1024 + 4096,
      system: "Be brief.",
      messages: [
        { role: "user", content: [{ type: "text", text: "weather in Oslo and Rome?" }] },
        {
          role: "assistant",
          content: [
            { type: "thinking", thinking: "Two cities.", signature: "sig-abc" },
            { type: "tool_use", id: "c1", name: "get_weather", input: { city: "Oslo" } },
            { type: "tool_use", id: "c2", name: "get_weather", input: { city: "Rome" } },
          ],
        },
        {
          role: "user",
          content: [
            { type: "tool_result", tool_use_id: "c1", content: "sunny" },
            { type: "tool_result", tool_use_id: "c2", content: "timeout", is_error: true },
          ],
        },
      ],
      tools: [
        { name: "get_weather", description: "Weather", input_schema: { type: "object", properties: {} } },
      ],
      thinking: { type: "enabled", budget_tokens: 1024 },
      temperature: 1,
      stream: true,
    });
    expect(first?.headers["x-api-key"]).toBe(KEY);
    expect(first?.headers.authorization).toBeUndefined();
    expect(first?.headers["anthropic-version"]).toEqual(expect.any(String));
    expect(first?.headers["x-team"]).toBe("qa");
    expect(second?.body).not.toHaveProperty("system");
    expect(second?.body).not.toHaveProperty("tools");
    expect(second?.body).not.toHaveProperty("thinking");
    expect(second?.body.max_tokens).toBe(4096);
  });

  it("streams a scripted reply: thinking with signature, text, two tool calls, usage with cache reads", async () => {
    const s = await serve([
      {
        thinking: "Think first.",
        signature: "sig-xyz",
        text: "Calling two tools now.",
        toolCalls: [
          { id: "a", name: "read", input: { path: "README.md", lines: [1, 20] } },
          { name: "ls", input: {} },
        ],
        usage: { inputTokens: 12, outputTokens: 7, cachedInputTokens: 4 },
      },
    ]);
    const events = await collect({ baseURL: s.url });
    expect(events.filter((e) => e.type === "text_delta").length).toBeGreaterThan(1);
    expect(deltaText(events, "thinking_delta")).toBe("Think first.");
    expect(done(events)).toEqual({
      content: "Calling two tools now.",
      thinking: "Think first.",
      thinkingSignature: "sig-xyz",
      toolCalls: [
        { id: "a", name: "read", arguments: '{"path":"README.md","lines":[1,20]}' },
        { id: "toolu_fake_0_1", name: "ls", arguments: "{}" },
      ],
      finishReason: "tool_use",
      usage: { inputTokens: 12, outputTokens: 7, cachedInputTokens: 4 },
      id: "msg_fake_0",
      model: "claude-test",
    });
  });

  it("retries a 429 with retry-after (seconds), then succeeds", async () => {
    const s = await serve([{ status: 429, headers: { "retry-after": "0.001" } }, { text: "ok" }]);
    const events = await collect({ baseURL: s.url, maxRetries: 3 });
    expect(done(events).content).toBe("ok");
    expect(s.requests).toHaveLength(2);
    expect(s.requests[1]?.headers["x-stainless-retry-count"]).toBe("1");
  });

  it("gives up on a persistent 500 after 1 + maxRetries requests (default 3)", async () => {
    const s = await serve(() => ({ status: 500, headers: { "retry-after-ms": "1" } }));
    const model = anthropicModel({ model: "claude-test", apiKey: KEY, baseURL: s.url });
    const events: ModelEvent[] = [];
    for await (const e of model.stream(request, {})) events.push(e);
    expect(errorOf(events)).toEqual({
      code: "http_500",
      status: 500,
      message: "Model API error (HTTP 500): Fake server error (HTTP 500)",
    });
    expect(s.requests).toHaveLength(4);
  });

  it("does not retry a 400, and reports Anthropic's error message", async () => {
    const body = JSON.stringify({
      type: "error",
      error: { type: "invalid_request_error", message: "messages: roles must alternate" },
    });
    const s = await serve(() => ({ status: 400, body }));
    const error = errorOf(await collect({ baseURL: s.url, maxRetries: 3 }));
    expect(error).toEqual({
      code: "http_400",
      status: 400,
      message: "Model API error (HTTP 400): messages: roles must alternate",
    });
    expect(s.requests).toHaveLength(1);
  });

  it("never puts the API key in a 401 message, even when the body echoes it", async () => {
    const key = "my-anthropic-key-SECRET-123456";
    const body = JSON.stringify({
      type: "error",
      error: { type: "authentication_error", message: `invalid x-api-key: ${key}\nx-api-key: ${key}` },
    });
    const s = await serve(() => ({ status: 401, body }));
    const error = errorOf(await collect({ baseURL: s.url, apiKey: key, maxRetries: 3 }));
    expect(error.code).toBe("http_401");
    expect(error.message).toMatch(/^Model API error \(HTTP 401\): invalid x-api-key/);
    expect(error.message).toContain("(check the API key)");
    expect(error.message).not.toMatch(/SECRET|\n/);
    expect(s.requests).toHaveLength(1);
  });

  it("surfaces a mid-stream `event: error` as provider_error", async () => {
    const raw =
      'event: message_start\ndata: {"type":"message_start","message":{"usage":{"input_tokens":3,"output_tokens":1}}}\n\n' +
      'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n' +
      'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}\n\n' +
      'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n';
    const s = await serve([{ raw }]);
    const events = await collect({ baseURL: s.url, maxRetries: 3 });
    expect(deltaText(events, "text_delta")).toBe("Hel");
    expect(errorOf(events)).toEqual({
      code: "provider_error",
      message: "Model API error: Overloaded (overloaded_error)",
    });
    expect(s.requests).toHaveLength(1);
  });

  it("reports a stream that breaks off, or ends early, or is not a stream, as stream_incomplete", async () => {
    const s = await serve([
      { breakOff: true, afterText: "Partial answer" },
      { raw: 'event: message_start\ndata: {"type":"message_start","message":{}}\n\n' },
      { raw: '{"id":"msg_1","type":"message","content":[{"type":"text","text":"Hi"}]}' },
    ]);
    const broken = await collect({ baseURL: s.url });
    expect(deltaText(broken, "text_delta")).toBe("Partial answer");
    expect(errorOf(broken).code).toBe("stream_incomplete");
    expect(errorOf(await collect({ baseURL: s.url })).code).toBe("stream_incomplete");
    expect(errorOf(await collect({ baseURL: s.url }))).toMatchObject({
      code: "stream_incomplete",
      message: expect.stringContaining("without an event stream"),
    });
  });

  it("reports malformed event JSON as invalid_response", async () => {
    const s = await serve([{ raw: "event: message_start\ndata: {not json\n\n" }]);
    expect(errorOf(await collect({ baseURL: s.url })).code).toBe("invalid_response");
  });

  it("without a key: ANTHROPIC_API_KEY, a placeholder for a base URL, else missing_api_key", async () => {
    vi.stubEnv("ANTHROPIC_API_KEY", "");
    vi.stubEnv("ANTHROPIC_AUTH_TOKEN", "");
    vi.stubEnv("ANTHROPIC_BASE_URL", "");
    const s = await serve(() => ({ text: "local" }));
    expect(done(await collect({ baseURL: s.url, apiKey: undefined })).content).toBe("local");
    expect(s.requests[0]?.headers["x-api-key"]).toBe("not-needed");
    vi.stubEnv("ANTHROPIC_API_KEY", "env-key-1234");
    vi.stubEnv("ANTHROPIC_BASE_URL", s.url);
    expect(done(await collect({ apiKey: undefined })).content).toBe("local");
    expect(s.requests[1]?.headers["x-api-key"]).toBe("env-key-1234");
    vi.stubEnv("ANTHROPIC_API_KEY", "");
    vi.stubEnv("ANTHROPIC_BASE_URL", "");
    const error = errorOf(await collect({ apiKey: undefined }));
    expect(error.code).toBe("missing_api_key");
    expect(error.message).toContain("ANTHROPIC_API_KEY");
  });

  it("the fake server also answers a non-streaming request with one message object", async () => {
    const s = await serve([
      { thinking: "Hmm.", text: "Hi.", toolCalls: [{ id: "t", name: "ls", input: { a: 1 } }] },
    ]);
    const client = new Anthropic({ apiKey: KEY, baseURL: s.url, maxRetries: 0, logLevel: "off" });
    const message = await client.messages.create({
      model: "claude-test",
      max_tokens: 100,
      messages: [{ role: "user", content: "hi" }],
    });
    expect(message.content.map((b) => b.type)).toEqual(["thinking", "text", "tool_use"]);
    expect(message.content[2]).toMatchObject({ id: "t", name: "ls", input: { a: 1 } });
    expect(message.stop_reason).toBe("tool_use");
  });
});

describeTransport("anthropicModel", {
  serve,
  model: (options) => anthropicModel({ model: "claude-test", apiKey: KEY, ...options }),
  defaultIdleTimeoutMs: DEFAULT_IDLE_TIMEOUT_MS,
  openingOnly: 'event: message_start\ndata: {"type":"message_start","message":{}}\n\n',
  serveToolCalls: (count) =>
    serve(() => ({
      toolCalls: Array.from({ length: count }, (_, i) => ({
        name: "f",
        input: { text: "x".repeat(40 + i) },
      })),
    })),
});

describe("anthropicModel on proxies and bodies that are not a stream", () => {
  it("never requests a body that is not an event stream again", async () => {
    const s = await serve(() => ({ raw: '{"id":"msg_1","type":"message","content":[]}' }));
    expect(errorOf(await collect({ baseURL: s.url, maxRetries: 3 })).code).toBe("stream_incomplete");
    expect(s.requests).toHaveLength(1);
  });

  it("summarises a proxy's HTML error page, and an HTML page instead of a stream, by its title", async () => {
    const nginx = `<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body><h1>502 Bad Gateway</h1></body></html>`;
    const portal = `<!DOCTYPE html>\n<html><head><title>Sign in &amp; continue</title></head><body>${KEY}</body></html>`;
    const s = await serve([
      { status: 502, headers: { "content-type": "text/html" }, body: nginx },
      { raw: portal, headers: { "content-type": "text/html; charset=utf-8" } },
    ]);
    expect(errorOf(await collect({ baseURL: s.url }))).toEqual({
      code: "http_502",
      status: 502,
      message: "Model API error (HTTP 502): Bad Gateway (an HTML page, probably from a proxy)",
    });
    const page = errorOf(await collect({ baseURL: s.url, maxRetries: 3 }));
    expect(page.code).toBe("invalid_response");
    expect(page.message).toContain("an HTML page (Sign in & continue) instead of an event stream");
    expect(s.requests).toHaveLength(2);
  });
});
