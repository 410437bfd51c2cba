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
