import { describe, expect, it } from "vitest";
import { ChatStreamAssembler, completionToReply, mapUsage } from "./chat-assembler.js";

/** A chunk whose choice 0 carries `delta` (and optionally a finish_reason). */
const chunk = (delta: object, finish_reason: string | null = null, extra: object = {}) => ({
  object: "chat.completion.chunk",
  choices: [{ index: 0, delta, finish_reason }],
  ...extra,
});
const tc = (o: object) => chunk({ tool_calls: [o] });

function assemble(chunks: unknown[]) {
  const a = new ChatStreamAssembler();
  const events = chunks.flatMap((c) => a.push(c));
  return { events, reply: a.reply(), complete: a.complete };
}

describe("ChatStreamAssembler", () => {
  it("interleaves calls by index and keeps the order of first appearance", () => {
    const { reply } = assemble([
      tc({ index: 1, id: "b", function: { name: "second", arguments: "" } }),
      tc({ index: 0, id: "a", function: { name: "first", arguments: '{"x"' } }),
      tc({ index: 1, function: { arguments: '{"y":2}' } }),
      tc({ index: 0, function: { arguments: ":1}" } }),
      chunk({}, "tool_calls"),
    ]);
    expect(reply.toolCalls).toEqual([
      { id: "b", name: "second", arguments: '{"y":2}' },
      { id: "a", name: "first", arguments: '{"x":1}' },
    ]);
  });

  it("appends index-less deltas to the current call unless a new id arrives", () => {
    const { reply } = assemble([
      tc({ id: "a", function: { name: "one", arguments: '{"p":' } }),
      tc({ function: { arguments: "1}" } }),
      tc({ id: "b", function: { name: "two", arguments: "{" } }),
      tc({ id: "", function: { arguments: "}" } }),
      chunk({}, "tool_calls"),
    ]);
    expect(reply.toolCalls).toEqual([
      { id: "a", name: "one", arguments: '{"p":1}' },
      { id: "b", name: "two", arguments: "{}" },
    ]);
  });

  it("starts a new call when a reused index gets a new id, and ignores empty-id continuations", () => {
    const { reply } = assemble([
      tc({ index: 0, id: "a", function: { name: "edit" } }),
      tc({ index: 0, id: "", function: { arguments: "{}" } }),
      tc({ index: 0, id: "b", function: { name: "edit" } }),
      tc({ index: 0, function: { arguments: '{"n":2}' } }),
      chunk({}, "tool_calls"),
    ]);
    expect(reply.toolCalls).toEqual([
      { id: "a", name: "edit", arguments: "{}" },
      { id: "b", name: "edit", arguments: '{"n":2}' },
    ]);
  });

  it("keeps two calls with the same id at two indexes apart, continuations included", () => {
    const { reply } = assemble([
      tc({ index: 0, id: "dup", function: { name: "read", arguments: '{"a"' } }),
      tc({ index: 1, id: "dup", function: { name: "write", arguments: '{"b"' } }),
      tc({ index: 0, id: "dup", function: { arguments: ":1}" } }),
      tc({ index: 1, function: { arguments: ":2}" } }),
      chunk({}, "tool_calls"),
    ]);
    expect(reply.toolCalls).toEqual([
      { id: "dup", name: "read", arguments: '{"a":1}' },
      { id: "dup", name: "write", arguments: '{"b":2}' },
    ]);
  });

  it("starts a new call when a call's header (id and name) comes again at one index after complete arguments", () => {
    // Two calls with one id at one index, or at none: merged, they were one call with invalid arguments.
    for (const index of [0, undefined]) {
      const { reply } = assemble([
        tc({ index, id: "x", function: { name: "calc", arguments: "" } }),
        tc({ index, function: { arguments: '{"e":"1+1"}' } }),
        tc({ index, id: "x", function: { name: "calc", arguments: "" } }),
        tc({ index, function: { arguments: '{"e":"2+2"}' } }),
        tc({ index, id: "x", function: { name: "calc", arguments: '{"e":"3+3"}' } }),
        chunk({}, "tool_calls"),
      ]);
      expect(reply.toolCalls).toEqual([
        { id: "x", name: "calc", arguments: '{"e":"1+1"}' },
        { id: "x", name: "calc", arguments: '{"e":"2+2"}' },
        { id: "x", name: "calc", arguments: '{"e":"3+3"}' },
      ]);
    }
    // A header repeated while the arguments are still incomplete continues the call.
    const { reply } = assemble([
      tc({ index: 0, id: "x", function: { name: "calc", arguments: '{"e":' } }),
      tc({ index: 0, id: "x", function: { name: "calc", arguments: '"1+1"}' } }),
      chunk({}, "tool_calls"),
    ]);
    expect(reply.toolCalls).toEqual([{ id: "x", name: "calc", arguments: '{"e":"1+1"}' }]);
  });

  it("takes a header repeated on every delta of long arguments in linear time", () => {
    const pieces = Array.from({ length: 40_000 }, (_, i) => `"k${i}":"${"v".repeat(20)}",`);
    const { reply } = assemble([
      tc({ index: 0, id: "x", function: { name: "calc", arguments: "{" } }),
      ...pieces.map((p) => tc({ index: 0, id: "x", function: { name: "calc", arguments: p } })),
      tc({ index: 0, id: "x", function: { name: "calc", arguments: '"end":1}' } }),
      chunk({}, "tool_calls"),
    ]);
    expect(reply.toolCalls).toHaveLength(1);
    expect(JSON.parse(reply.toolCalls[0]?.arguments ?? "")).toMatchObject({
      k0: "vvvvvvvvvvvvvvvvvvvv",
      end: 1,
    });
  });

  it("serialises object arguments, takes a whole call in one delta, and names id-less calls", () => {
    const { reply } = assemble([
      tc({ function: { name: "get_weather", arguments: { city: "Tokyo" } } }),
      tc({ id: "x", type: "function", function: { name: "f", arguments: '{"a":1}' }, index: 3 }),
      chunk({}, "tool_calls"),
    ]);
    expect(reply.toolCalls).toEqual([
      { id: "call_0", name: "get_weather", arguments: '{"city":"Tokyo"}' },
      { id: "x", name: "f", arguments: '{"a":1}' },
    ]);
  });

  it("emits text and thinking deltas, skips empty-choices chunks, reads usage wherever it comes", () => {
    const { events, reply, complete } = assemble([
      { choices: [], prompt_filter_results: [{ prompt_index: 0 }] },
      chunk({ role: "assistant", content: "", reasoning_content: "Hm" }, null, { usage: null }),
      chunk({ reasoning: ", ok." }),
      chunk({ content: "Hi" }),
      { choices: [{ index: 1, delta: { content: "other choice" } }] },
      chunk({ content: " there" }, "stop", { x_groq: { usage: { prompt_tokens: 3, completion_tokens: 2 } } }),
    ]);
    expect(events).toEqual([
      { type: "thinking_delta", text: "Hm" },
      { type: "thinking_delta", text: ", ok." },
      { type: "text_delta", text: "Hi" },
      { type: "text_delta", text: " there" },
    ]);
    expect(complete).toBe(true);
    expect(reply).toEqual({
      content: "Hi there",
      thinking: "Hm, ok.",
      toolCalls: [],
      finishReason: "stop",
      usage: { inputTokens: 3, outputTokens: 2 },
    });
  });

  it("is incomplete until a finish_reason or a usage report arrives", () => {
    expect(assemble([chunk({ content: "Hi" })]).complete).toBe(false);
    expect(assemble([chunk({ content: "Hi" }), { choices: [], usage: { prompt_tokens: 1 } }]).complete).toBe(
      true,
    );
  });
});

/**
 * Server quirks in their wire shapes. Ollama: the `message` objects of the recorded native
 * `/api/chat` stream (/work/shared/fixtures/llm-streams/ollama-api-chat-stream-tool-call.ndjson)
 * carried as `/v1` deltas. vLLM and llama.cpp server: no recordings exist; these chunks are built
 * from the documented wire shapes (vLLM's `chatcmpl-tool-` ids, `stop_reason`, continuous usage
 * stats; llama-server's `reasoning_content`, `content: null` role delta, final chunk with `timings`).
 */
describe("ChatStreamAssembler on server quirks", () => {
  const v1 = (delta: object, finish_reason: string | null = null, extra: object = {}) => ({
    id: "chatcmpl-1",
    object: "chat.completion.chunk",
    created: 1751919739,
    model: "llama3.2",
    system_fingerprint: "fp_ollama",
    choices: [{ index: 0, delta, finish_reason }],
    ...extra,
  });

  it("Ollama: a whole call in one chunk, arguments as an object, no index, no id", () => {
    const { reply, complete } = assemble([
      v1({
        role: "assistant",
        content: "",
        tool_calls: [{ function: { name: "get_weather", arguments: { city: "Tokyo" } } }],
      }),
      v1({ role: "assistant", content: "" }, "stop"),
    ]);
    expect(complete).toBe(true);
    expect(reply.toolCalls).toEqual([{ id: "call_0", name: "get_weather", arguments: '{"city":"Tokyo"}' }]);
    expect(reply.content).toBe("");
  });

  it("Ollama: several index-less, id-less calls, in one chunk or one after another", () => {
    const weather = (city: string) => ({ function: { name: "get_weather", arguments: { city } } });
    const together = assemble([v1({ tool_calls: [weather("Tokyo"), weather("Paris")] }), v1({}, "stop")]);
    const apart = assemble([
      v1({ tool_calls: [weather("Tokyo")] }),
      v1({ tool_calls: [weather("Paris")] }),
      v1({}, "stop"),
    ]);
    for (const { reply } of [together, apart]) {
      expect(reply.toolCalls).toEqual([
        { id: "call_0", name: "get_weather", arguments: '{"city":"Tokyo"}' },
        { id: "call_1", name: "get_weather", arguments: '{"city":"Paris"}' },
      ]);
    }
  });

  it("vLLM: id, index and all arguments in one delta, a tool-only reply with content null", () => {
    const vllm = (delta: object, finish: string | null = null) => ({
      id: "chatcmpl-9f2c",
      object: "chat.completion.chunk",
      created: 1735000000,
      model: "Qwen/Qwen2.5-7B-Instruct",
      choices: [
        { index: 0, delta, logprobs: null, finish_reason: finish, ...(finish && { stop_reason: null }) },
      ],
    });
    const { events, reply, complete } = assemble([
      vllm({ role: "assistant", content: "" }),
      vllm({
        content: null,
        tool_calls: [
          {
            id: "chatcmpl-tool-5d1e0c",
            type: "function",
            index: 0,
            function: { name: "get_weather", arguments: '{"city": "Paris"}' },
          },
        ],
      }),
      vllm({ content: "" }, "tool_calls"),
      { ...vllm({}), choices: [], usage: { prompt_tokens: 180, total_tokens: 200, completion_tokens: 20 } },
    ]);
    expect(events).toEqual([]);
    expect(complete).toBe(true);
    expect(reply).toEqual({
      id: "chatcmpl-9f2c",
      model: "Qwen/Qwen2.5-7B-Instruct",
      content: "",
      toolCalls: [{ id: "chatcmpl-tool-5d1e0c", name: "get_weather", arguments: '{"city": "Paris"}' }],
      finishReason: "tool_calls",
      usage: { inputTokens: 180, outputTokens: 20 },
    });
  });

  it("vLLM: usage on every chunk (continuous_usage_stats) does not make a cut stream complete", () => {
    const usage = (n: number) => ({ usage: { prompt_tokens: 5, completion_tokens: n, total_tokens: 5 + n } });
    const cut = assemble([
      chunk({ reasoning: "Hmm" }, null, usage(1)),
      chunk({ content: "Hi" }, null, usage(2)),
    ]);
    expect(cut.complete).toBe(false);
    expect(cut.events).toEqual([
      { type: "thinking_delta", text: "Hmm" },
      { type: "text_delta", text: "Hi" },
    ]);
    const whole = assemble([chunk({ content: "Hi" }, null, usage(1)), chunk({}, "stop", usage(2))]);
    expect(whole.complete).toBe(true);
    expect(whole.reply.usage).toEqual({ inputTokens: 5, outputTokens: 2 });
  });

  it("llama.cpp server: reasoning_content as thinking, content null, a final chunk with timings", () => {
    const llama = (delta: object, finish: string | null = null, extra: object = {}) => ({
      choices: [{ finish_reason: finish, index: 0, delta }],
      created: 1754523863,
      id: "chatcmpl-X6urH4f6JOotPwco2EgcgeoM6ZWup59u",
      model: "gpt-oss:20b",
      system_fingerprint: "b6097-9515c613",
      object: "chat.completion.chunk",
      ...extra,
    });
    const timings = { prompt_n: 12, prompt_ms: 20.1, predicted_n: 9, predicted_ms: 33.6 };
    const { events, reply, complete } = assemble([
      llama({ role: "assistant", content: null }),
      llama({ reasoning_content: "User says hi." }),
      llama({ reasoning_content: " Greet back." }),
      llama({ content: "Hello!" }),
      llama({}, "stop", { usage: { completion_tokens: 9, prompt_tokens: 12, total_tokens: 21 }, timings }),
    ]);
    expect(events).toEqual([
      { type: "thinking_delta", text: "User says hi." },
      { type: "thinking_delta", text: " Greet back." },
      { type: "text_delta", text: "Hello!" },
    ]);
    expect(complete).toBe(true);
    expect(reply).toEqual({
      id: "chatcmpl-X6urH4f6JOotPwco2EgcgeoM6ZWup59u",
      model: "gpt-oss:20b",
      content: "Hello!",
      thinking: "User says hi. Greet back.",
      toolCalls: [],
      finishReason: "stop",
      usage: { inputTokens: 12, outputTokens: 9 },
    });
  });
});

describe("completionToReply and mapUsage", () => {
  it("maps a chat.completion with reasoning and object arguments", () => {
    const reply = completionToReply({
      choices: [
        {
          index: 0,
          finish_reason: "tool_calls",
          message: {
            content: null,
            reasoning_content: "why",
            tool_calls: [
              { id: "c", function: { name: "f", arguments: { a: 1 } } },
              { function: { name: "g" } },
            ],
          },
        },
      ],
      usage: { prompt_tokens: 5, completion_tokens: 6, prompt_tokens_details: { cached_tokens: 2 } },
    });
    expect(reply).toEqual({
      content: "",
      thinking: "why",
      toolCalls: [
        { id: "c", name: "f", arguments: '{"a":1}' },
        { id: "call_1", name: "g", arguments: "" },
      ],
      finishReason: "tool_calls",
      usage: { inputTokens: 5, outputTokens: 6, cachedInputTokens: 2 },
    });
    // vLLM's non-streaming tool-only reply: content null, reasoning_content null.
    const vllm = completionToReply({
      object: "chat.completion",
      choices: [
        {
          index: 0,
          message: {
            role: "assistant",
            content: null,
            reasoning_content: null,
            tool_calls: [
              { id: "chatcmpl-tool-1", type: "function", function: { name: "ls", arguments: "{}" } },
            ],
          },
          logprobs: null,
          finish_reason: "tool_calls",
          stop_reason: null,
        },
      ],
    });
    expect(vllm).toMatchObject({
      content: "",
      toolCalls: [{ id: "chatcmpl-tool-1", name: "ls", arguments: "{}" }],
    });
    expect(vllm?.thinking).toBeUndefined();
    expect(completionToReply({ choices: [] })).toBeUndefined();
    expect(completionToReply("<html>")).toBeUndefined();
  });

  it("maps usage details only when present", () => {
    expect(mapUsage(null)).toBeUndefined();
    expect(
      mapUsage({
        prompt_tokens: 1,
        completion_tokens: 2,
        completion_tokens_details: { reasoning_tokens: 1 },
      }),
    ).toEqual({ inputTokens: 1, outputTokens: 2, reasoningTokens: 1 });
  });
});
