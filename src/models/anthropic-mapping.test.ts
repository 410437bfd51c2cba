/** Message mapping to the Anthropic wire (pure), and one agent run end to end against the fake server. */
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import type { Message } from "../core/messages.js";
import { Agent, defineTool } from "../index.js";
import { type FakeAnthropicServer, startFakeAnthropicServer } from "../testing/fake-anthropic-server.js";
import { anthropicModel } from "./anthropic.js";
import { AnthropicStreamAssembler, UNCLOSED_REASON } from "./anthropic-assembler.js";
import { toAnthropicMessages, toAnthropicRequestBody } from "./anthropic-wire.js";

const call = (id: string, name: string, args: string) => ({ id, name, arguments: args });
const result = (id: string, content: string, isError = false): Message => ({
  role: "tool",
  toolCallId: id,
  name: "t",
  content,
  isError,
});

/** Anthropic rejects two messages of one role in a row. */
function expectAlternating(messages: { role: string }[]) {
  messages.forEach((m, i) => {
    expect(m.role).toBe(i % 2 === 0 ? "user" : "assistant");
  });
}

describe("toAnthropicMessages", () => {
  it("sends thinking (with its signature) first, then text, then tool_use; results in one user message", () => {
    const wire = toAnthropicMessages([
      { role: "user", content: "add 1+2 and 3+4" },
      {
        role: "assistant",
        content: "Adding both.",
        thinking: "Two sums.",
        thinkingSignature: "sig-1",
        toolCalls: [call("a", "add", '{"a":1,"b":2}'), call("b", "add", '{"a":3,"b":4}')],
      },
      // Out of call order on purpose: they are sent in the order of the calls.
      result("b", "7"),
      result("a", "boom", true),
      { role: "user", content: "Notice: 2 iterations left." },
      { role: "assistant", content: "3 and 7." },
    ]);
    expect(wire).toEqual([
      { role: "user", content: [{ type: "text", text: "add 1+2 and 3+4" }] },
      {
        role: "assistant",
        content: [
          { type: "thinking", thinking: "Two sums.", signature: "sig-1" },
          { type: "text", text: "Adding both." },
          { type: "tool_use", id: "a", name: "add", input: { a: 1, b: 2 } },
          { type: "tool_use", id: "b", name: "add", input: { a: 3, b: 4 } },
        ],
      },
      {
        role: "user",
        content: [
          { type: "tool_result", tool_use_id: "a", content: "boom", is_error: true },
          { type: "tool_result", tool_use_id: "b", content: "7" },
          { type: "text", text: "Notice: 2 iterations left." },
        ],
      },
      { role: "assistant", content: [{ type: "text", text: "3 and 7." }] },
    ]);
  });

  it("merges consecutive user messages, drops empty text and empty assistant turns, and sends `{}` for bad input", () => {
    const wire = toAnthropicMessages([
      { role: "user", content: "first" },
      { role: "user", content: "  " },
      { role: "user", content: "second" },
      { role: "assistant", content: "" },
      { role: "user", content: "third" },
      {
        role: "assistant",
        content: " ",
        thinking: "unsigned thinking is never sent",
        toolCalls: [
          { ...call("x", "make_file", '{"filename": "tax'), invalid: "cut off" },
          call("y", "ls", "[1,2]"),
          call("z", "ls", ""),
        ],
      },
      result("x", "cut off", true),
      result("y", ""),
      result("z", "ok"),
    ]);
    expectAlternating(wire);
    expect(wire[0]?.content).toEqual([
      { type: "text", text: "first" },
      { type: "text", text: "second" },
      { type: "text", text: "third" },
    ]);
    expect(wire[1]?.content).toEqual([
      { type: "tool_use", id: "x", name: "make_file", input: {} },
      { type: "tool_use", id: "y", name: "ls", input: {} },
      { type: "tool_use", id: "z", name: "ls", input: {} },
    ]);
    expect(wire[2]?.content).toEqual([
      { type: "tool_result", tool_use_id: "x", content: "cut off", is_error: true },
      { type: "tool_result", tool_use_id: "y" },
      { type: "tool_result", tool_use_id: "z", content: "ok" },
    ]);
  });

  it("builds the body: max_tokens, top-level system, tools with input_schema, thinking, extraBody", () => {
    const body = toAnthropicRequestBody(
      {
        system: "Be brief.",
        messages: [{ role: "user", content: "hi" }],
        tools: [{ name: "ls", description: "", parameters: { properties: {} } }],
      },
      { model: "claude-x", thinking: { budgetTokens: 2048 }, extraBody: { temperature: 1 } },
    );
    expect(body).toEqual({
      model: "claude-x",
      max_tokens: 2048 + 4096,
      system: "Be brief.",
      messages: [{ role: "user", content: [{ type: "text", text: "hi" }] }],
      tools: [{ name: "ls", input_schema: { type: "object", properties: {} } }],
      thinking: { type: "enabled", budget_tokens: 2048 },
      temperature: 1,
      stream: true,
    });
  });
});

describe("AnthropicStreamAssembler", () => {
  it("flags an unclosed tool_use, reads a whole input from the start event, and drops an ambiguous signature", () => {
    const a = new AnthropicStreamAssembler();
    const block = (index: number, content_block: object) => ({
      type: "content_block_start",
      index,
      content_block,
    });
    const delta = (index: number, d: object) => ({ type: "content_block_delta", index, delta: d });
    const events = [
      {
        type: "message_start",
        message: { usage: { input_tokens: 5, cache_creation_input_tokens: 2, output_tokens: 1 } },
      },
      block(0, { type: "thinking", thinking: "", signature: "" }),
      delta(0, { type: "thinking_delta", thinking: "A." }),
      delta(0, { type: "signature_delta", signature: "s1" }),
      { type: "content_block_stop", index: 0 },
      block(1, { type: "thinking", thinking: "B.", signature: "s2" }),
      { type: "content_block_stop", index: 1 },
      block(2, { type: "tool_use", id: "t1", name: "ls", input: { path: "." } }),
      { type: "content_block_stop", index: 2 },
      block(3, { type: "tool_use", id: "t2", name: "cat", input: {} }),
      delta(3, { type: "input_json_delta", partial_json: '{"path":"a"}' }),
      { type: "message_delta", delta: { stop_reason: "tool_use" }, usage: { output_tokens: 9 } },
      { type: "message_stop" },
    ];
    const deltas = events.flatMap((e) => a.push(e));
    expect(deltas).toEqual([
      { type: "thinking_delta", text: "A." },
      { type: "thinking_delta", text: "B." },
    ]);
    expect(a.complete).toBe(true);
    expect(a.reply()).toEqual({
      content: "",
      thinking: "A.B.",
      toolCalls: [
        { id: "t1", name: "ls", arguments: '{"path":"."}' },
        { id: "t2", name: "cat", arguments: '{"path":"a"}', invalid: UNCLOSED_REASON },
      ],
      finishReason: "tool_use",
      usage: { inputTokens: 7, outputTokens: 9 },
    });
  });
});

describe("Agent with anthropicModel end to end", () => {
  let fake: FakeAnthropicServer | undefined;
  afterEach(async () => {
    await fake?.close();
    fake = undefined;
  });

  it("runs a tool call, then answers", async () => {
    fake = await startFakeAnthropicServer({
      respond: [
        {
          thinking: "I should add.",
          signature: "sig-add",
          text: "Let me add.",
          toolCalls: [{ id: "toolu_1", name: "add", input: { a: 2, b: 3 } }],
          usage: { inputTokens: 50, outputTokens: 20 },
        },
        { text: "2 + 3 = 5.", usage: { inputTokens: 80, outputTokens: 8 } },
      ],
    });
    const add = defineTool({
      name: "add",
      description: "Adds two numbers.",
      parameters: z.object({ a: z.number(), b: z.number() }),
      execute: ({ a, b }) => a + b,
    });
    const agent = new Agent({
      model: anthropicModel({ model: "claude-sonnet-4-5", baseURL: fake.url, apiKey: "test" }),
      instructions: "You add numbers.",
      tools: [add],
    });
    const run = await agent.run("What is 2 + 3?");
    expect(run).toMatchObject({ output: "2 + 3 = 5.", stopReason: "final_answer", iterations: 2 });
    expect(run.usage).toMatchObject({ inputTokens: 130, outputTokens: 28 });
    expect(fake.requests).toHaveLength(2);
    const second = fake.requests[1]?.body;
    expect(second.system).toContain("You add numbers.");
    expect(second.tools[0]).toMatchObject({ name: "add", input_schema: { type: "object" } });
    expectAlternating(second.messages);
    expect(second.messages.slice(1)).toEqual([
      {
        role: "assistant",
        content: [
          { type: "thinking", thinking: "I should add.", signature: "sig-add" },
          { type: "text", text: "Let me add." },
          { type: "tool_use", id: "toolu_1", name: "add", input: { a: 2, b: 3 } },
        ],
      },
      { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: "5" }] },
    ]);
    expect(fake.requests[0]?.headers["x-api-key"]).toBe("test");
    expect(fake.requests[0]?.headers.authorization).toBeUndefined();
  });
});
