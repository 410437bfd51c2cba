/**
 * The adapter over real HTTP against every OpenAI-compatible recorded stream in
 * ../shared/fixtures/llm-streams (provenance and the expected results are in SOURCES.md there).
 * Skipped, saying so, when that folder is absent.
 */
import { readdirSync } from "node:fs";
import { describe, expect, it } from "vitest";
import {
  bare,
  call,
  collect as collectEvents,
  deltaText,
  done,
  errorOf,
  FIXTURES,
  fakeServerPerTest,
  fixture,
  recordedData,
} from "../../test/support/model-harness.js";
import { startFakeOpenAIServer } from "../testing/fake-openai-server.js";
import type { ModelReply } from "./adapter.js";
import { type OpenAIChatModelOptions, openAIChatModel } from "./openai-chat.js";

const haveFixtures = recordedData("llm-streams");
const serve = fakeServerPerTest(startFakeOpenAIServer);
const collect = (options: Partial<OpenAIChatModelOptions>) =>
  collectEvents(
    openAIChatModel({ model: "test-model", apiKey: "sk-test-key-0000", maxRetries: 0, ...options }),
  );

type Expected = Omit<ModelReply, "thinking"> & { thinking?: string };

/** What SOURCES.md says each recorded stream must assemble to. */
const STREAMS: Record<string, Expected> = {
  "openai-chat-tool-call-split-args-include-usage.sse.txt": {
    content: "",
    toolCalls: [call("call_4XzlGBLtUe9dy3GVNV4jhq7h", "get_weather", '{"city":"New York City"}')],
    finishReason: "tool_calls",
    usage: { inputTokens: 44, outputTokens: 16, reasoningTokens: 0 },
  },
  "openai-chat-strict-tool-call.sse.txt": {
    content: "",
    toolCalls: [
      call("call_CTf1nWJLqSeRgDqaCG27xZ74", "get_weather", '{"city":"San Francisco","state":"CA"}'),
    ],
    finishReason: "tool_calls",
    usage: { inputTokens: 48, outputTokens: 19, reasoningTokens: 0 },
  },
  "openai-chat-parallel-tool-calls-sequential.sse.txt": {
    content: "",
    toolCalls: [
      call(
        "call_JMW1whyEaYG438VE1OIflxA2",
        "GetWeatherArgs",
        '{"city": "Edinburgh", "country": "GB", "units": "c"}',
      ),
      call("call_DNYTawLBoN8fj3KN6qU9N1Ou", "get_stock_price", '{"ticker": "AAPL", "exchange": "NASDAQ"}'),
    ],
    finishReason: "tool_calls",
    usage: { inputTokens: 149, outputTokens: 60, reasoningTokens: 0 },
  },
  "openai-chat-parallel-tool-calls-split-args.sse.txt": {
    content: "",
    toolCalls: [
      call("call_NS4iQj14cDFwc0BnrKqDHavt", "get_weather", '{"city": "Mexico City"}'),
      call("call_SkGkkGDvHQEEk0CGbnAh2AQw", "get_product_name", "{}"),
    ],
    finishReason: "tool_calls",
    usage: { inputTokens: 417, outputTokens: 44, cachedInputTokens: 0, reasoningTokens: 0 },
  },
  "azure-openai-chat-prompt-filter-results-text.sse.txt": {
    content: "Capital of Denmark.",
    toolCalls: [],
    finishReason: "stop",
    usage: { inputTokens: 15, outputTokens: 78, cachedInputTokens: 0, reasoningTokens: 64 },
  },
  "copilot-azure-prompt-filter-then-tool-call.sse.txt": {
    content: "",
    toolCalls: [call("call_ZQkSp6hzLvcGcH2L2CmaBkXM", "copilot_searchCodebase", '{"query":"linkedlist"}')],
    finishReason: "tool_calls",
    usage: { inputTokens: 218, outputTokens: 0 },
  },
  "openai-compat-gateway-text-then-tool-call-index-1.sse.txt": {
    content: "Reading it.",
    toolCalls: [call("toolu_sanitized", "read_file", '{"path": "a.txt"}')],
    finishReason: "tool_calls",
    usage: { inputTokens: 0, outputTokens: 0 },
  },
  "groq-chat-reasoning-then-single-delta-tool-call.sse.txt": {
    content: "",
    thinking: 'We need to call the function with correct parameter "name". Provide a name, e.g., "example".',
    toolCalls: [
      call("fc_bfb39741-3748-4def-9886-a93fc9c64a90", "get_something_by_name", '{"name":"example"}'),
    ],
    finishReason: "tool_calls",
    usage: { inputTokens: 304, outputTokens: 49, reasoningTokens: 23 },
  },
  "deepseek-chat-reasoning-then-tool-call.sse.txt": {
    content: "",
    thinking:
      "The user is asking for the weather in San Francisco. I need to use the weather tool to get this information. " +
      'Let me invoke the weather tool with the location parameter set to "San Francisco".',
    toolCalls: [call("call_00_ioIn7yN9p1ZOMNpDLwd4MgAF", "weather", '{"location": "San Francisco"}')],
    finishReason: "tool_calls",
    usage: { inputTokens: 339, outputTokens: 83, cachedInputTokens: 320, reasoningTokens: 39 },
  },
  "alibaba-qwen-chat-tool-call-empty-id-continuations.sse.txt": {
    content: "",
    toolCalls: [call("call_eee11723464a4b9eb8cee71d", "weather", '{"location": "San Francisco"}')],
    finishReason: "tool_calls",
    usage: { inputTokens: 295, outputTokens: 22, cachedInputTokens: 0 },
  },
};

/** Non-streaming `chat.completion` bodies. */
const COMPLETIONS: Record<string, Expected> = {
  "openai-chat-tool-call.json": {
    content: "",
    toolCalls: [
      call(
        "call_Y6qJ7ofLgOrBnMD5WbVAeiRV",
        "GetWeatherArgs",
        '{"city":"Edinburgh","country":"UK","units":"c"}',
      ),
    ],
    finishReason: "tool_calls",
    usage: { inputTokens: 76, outputTokens: 24, reasoningTokens: 0 },
  },
  "openai-chat-parallel-tool-calls.json": {
    content: "",
    toolCalls: [
      call(
        "call_fdNz3vOBKYgOIpMdWotB9MjY",
        "GetWeatherArgs",
        '{"city": "Edinburgh", "country": "GB", "units": "c"}',
      ),
      call("call_h1DWI1POMJLb0KwIyQHWXD4p", "get_stock_price", '{"ticker": "AAPL", "exchange": "NASDAQ"}'),
    ],
    finishReason: "tool_calls",
    usage: { inputTokens: 149, outputTokens: 60, reasoningTokens: 0 },
  },
  "ollama-v1-chat-tool-call-with-reasoning.json": {
    content: "",
    toolCalls: [call("call_o2vnpxrw", "final_result", '{"city":"Paris","country":"France"}')],
    finishReason: "tool_calls",
    usage: { inputTokens: 206, outputTokens: 194 },
  },
};

const SPECIAL = [
  "groq-chat-midstream-error-event.sse.txt",
  "copilot-claude-text-then-two-tool-calls-reused-index.sse.txt",
];

describe.skipIf(!haveFixtures)("openAIChatModel over recorded provider streams", () => {
  it("has an expectation for every OpenAI-compatible fixture", () => {
    const files = readdirSync(FIXTURES ?? "").filter(
      (f) =>
        !f.startsWith("anthropic-") &&
        (f.endsWith(".sse.txt") || /^(openai-chat|ollama-v1)-.*\.json$/.test(f)),
    );
    expect(files.sort()).toEqual([...Object.keys(STREAMS), ...Object.keys(COMPLETIONS), ...SPECIAL].sort());
  });

  for (const [name, expected] of Object.entries(STREAMS)) {
    it(`assembles ${name}`, async () => {
      const s = await serve(() => ({ raw: fixture(name) }));
      const events = await collect({ baseURL: s.url });
      expect(bare(done(events))).toEqual(expected);
      expect(deltaText(events, "text_delta")).toBe(expected.content);
      expect(deltaText(events, "thinking_delta")).toBe(expected.thinking ?? "");
    });
  }

  for (const [name, expected] of Object.entries(COMPLETIONS)) {
    it(`maps the non-streaming ${name}`, async () => {
      const s = await serve(() => ({ raw: fixture(name) }));
      const events = await collect({ baseURL: s.url, stream: false });
      const reply = done(events);
      const { thinking, ...rest } = bare(reply);
      expect(rest).toEqual(expected);
      expect(s.requests[0]?.body.stream).toBe(false);
      expect(s.requests[0]?.body.stream_options).toBeUndefined();
      if (name.startsWith("ollama")) {
        expect(thinking).toMatch(/^The conversation: user asked "What is the capital of France\?"/);
        expect(events.map((e) => e.type)).toEqual(["thinking_delta", "done"]);
      } else expect(events.map((e) => e.type)).toEqual(["done"]);
    });
  }

  it("surfaces groq's mid-stream `event: error` as an error, never as done", async () => {
    const s = await serve(() => ({ raw: fixture("groq-chat-midstream-error-event.sse.txt") }));
    const events = await collect({ baseURL: s.url });
    const error = errorOf(events);
    expect(error.code).toBe("provider_error");
    expect(error.status).toBeUndefined();
    expect(error.message).toContain("Tool call validation failed");
    expect(error.message).not.toContain("\n");
    expect(deltaText(events, "thinking_delta")).toMatch(
      /^We need to call the tool with invalid parameters first, /,
    );
    expect(events.some((e) => e.type === "done")).toBe(false);
    expect(s.requests).toHaveLength(1);
  });

  it("splits copilot-claude's two calls on a reused index by their new id", async () => {
    const s = await serve(() => ({
      raw: fixture("copilot-claude-text-then-two-tool-calls-reused-index.sse.txt"),
    }));
    const reply = done(await collect({ baseURL: s.url }));
    expect(reply.content).toBe(
      "I'll make two changes:\n1. Add a multiply function to test.js\n2. Modify server.js to return a random dad joke from a small collection",
    );
    expect(reply.toolCalls.map((c) => [c.id, c.name, c.arguments.length])).toEqual([
      ["tooluse_448k6WHnTpS28K0Bd1bhgA", "edit_file", 172],
      ["tooluse_2SRF2HShTXOoLdGrjWuGiw", "edit_file", 676],
    ]);
    expect(reply.toolCalls[0]?.arguments.startsWith('{"filePath":"/Users/roblou/')).toBe(true);
    expect(reply.finishReason).toBe("tool_calls");
    expect(reply.usage).toEqual({ inputTokens: 2128, outputTokens: 170 });
  });
});
