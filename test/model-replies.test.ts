/**
 * Replies the adapters must not misread, through an Agent: a refusal is told apart from an answer,
 * Mistral's typed content parts are text and thinking, and an Anthropic turn with a server-side
 * compaction pass counts (and costs) every iteration.
 */
import { afterEach, describe, expect, it } from "vitest";
import { Agent } from "../src/agent/agent.js";
import type { AgentEventBody, RunResult } from "../src/core/events.js";
import type { Model } from "../src/models/adapter.js";
import { anthropicModel } from "../src/models/anthropic.js";
import { openAIChatModel } from "../src/models/openai-chat.js";
import { startFakeAnthropicServer } from "../src/testing/fake-anthropic-server.js";
import { startFakeOpenAIServer } from "../src/testing/fake-openai-server.js";

const servers: { close(): Promise<void> }[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

/** An OpenAI-compatible model whose server answers with these chunks' deltas (then a finish chunk and usage). */
async function chatModel(deltas: unknown[], finish = "stop"): Promise<Model> {
  const chunk = (delta: unknown, finishReason: string | null = null) =>
    `data: ${JSON.stringify({ id: "c1", object: "chat.completion.chunk", choices: [{ index: 0, delta, finish_reason: finishReason }] })}\n\n`;
  const usage = `data: ${JSON.stringify({ id: "c1", choices: [], usage: { prompt_tokens: 10, completion_tokens: 5 } })}\n\n`;
  const raw = `${deltas.map((d) => chunk(d)).join("")}${chunk({}, finish)}${usage}data: [DONE]\n\n`;
  const s = await startFakeOpenAIServer({ respond: [{ raw }] });
  servers.push(s);
  return openAIChatModel({ model: "gpt-4o", apiKey: "sk-test", baseURL: s.url, maxRetries: 0 });
}

/** An Anthropic model whose server answers with these events (each given as its data object). */
async function messagesModel(events: Record<string, unknown>[]): Promise<Model> {
  const raw = events.map((e) => `event: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`).join("");
  const s = await startFakeAnthropicServer({ respond: [{ raw }] });
  servers.push(s);
  return anthropicModel({ model: "claude-opus-4-6", apiKey: "sk-ant-test", baseURL: s.url, maxRetries: 0 });
}

async function runAgent(agent: Agent): Promise<{ result: RunResult; events: AgentEventBody[] }> {
  const events: AgentEventBody[] = [];
  const run = agent.stream("hi");
  for await (const { runId, ...event } of run) {
    expect(runId).toBe(run.runId);
    events.push(event as AgentEventBody);
  }
  return { result: await run.result, events };
}

const start = (usage: Record<string, unknown>) => ({
  type: "message_start",
  message: { id: "msg_1", type: "message", role: "assistant", content: [], usage },
});

describe("refusals", () => {
  it("OpenAI: delta.refusal is the run's refusal, not its answer text", async () => {
    const model = await chatModel([
      { role: "assistant", content: null, refusal: "" },
      { refusal: "I'm sorry, " },
      { refusal: "I can't help with that." },
    ]);
    const { result, events } = await runAgent(new Agent({ model }));
    const refusal = "I'm sorry, I can't help with that.";
    expect(result).toMatchObject({ stopReason: "final_answer", refusal, output: refusal });
    expect(events.find((e) => e.type === "message")).toEqual({ type: "message", content: "", refusal });
    expect(events.filter((e) => e.type === "message_delta")).toEqual([]);
  });

  it("Anthropic: stop_reason refusal carries stop_details.explanation", async () => {
    const explanation = "This request was blocked under the Usage Policy.";
    const model = await messagesModel([
      start({ input_tokens: 18, output_tokens: 1 }),
      {
        type: "message_delta",
        delta: { stop_reason: "refusal", stop_details: { type: "refusal", explanation } },
        usage: { output_tokens: 5 },
      },
      { type: "message_stop" },
    ]);
    const { result, events } = await runAgent(new Agent({ model }));
    expect(result).toMatchObject({ stopReason: "final_answer", refusal: explanation, output: explanation });
    expect(result.steps[0]?.finishReason).toBe("refusal");
    expect(events.find((e) => e.type === "message")).toEqual({
      type: "message",
      content: "",
      refusal: explanation,
    });
  });

  it("an answer has no refusal", async () => {
    const model = await chatModel([{ role: "assistant", content: "Paris." }]);
    const { result, events } = await runAgent(new Agent({ model }));
    expect(result.output).toBe("Paris.");
    expect("refusal" in result).toBe(false);
    expect(events.find((e) => e.type === "message")).toEqual({ type: "message", content: "Paris." });
  });
});

it("Mistral's typed content parts become thinking and text", async () => {
  const thinking = (text: string) => ({
    content: [{ type: "thinking", thinking: [{ type: "text", text }] }],
  });
  const model = await chatModel([
    { role: "assistant", ...thinking("The user asks for 2+2. ") },
    thinking("That is 4."),
    { content: [{ type: "text", text: "2 + 2 = 4" }] },
  ]);
  const { result, events } = await runAgent(new Agent({ model }));
  expect(result.output).toBe("2 + 2 = 4");
  expect(result.messages.at(-1)).toMatchObject({
    content: "2 + 2 = 4",
    thinking: "The user asks for 2+2. That is 4.",
  });
  expect(events.filter((e) => e.type === "thinking").map((e) => e.type === "thinking" && e.text)).toEqual([
    "The user asks for 2+2. ",
    "That is 4.",
  ]);
});

it("Anthropic compaction: usage and cost count the compaction pass, once", async () => {
  const iteration = (type: string, input: number, output: number) => ({
    type,
    input_tokens: input,
    output_tokens: output,
    cache_read_input_tokens: 0,
    cache_creation_input_tokens: 0,
  });
  const model = await messagesModel([
    start({ input_tokens: 60385, output_tokens: 5 }),
    { type: "content_block_start", index: 0, content_block: { type: "compaction", content: null } },
    { type: "content_block_stop", index: 0 },
    { type: "content_block_start", index: 1, content_block: { type: "text", text: "" } },
    { type: "content_block_delta", index: 1, delta: { type: "text_delta", text: "Summary done." } },
    { type: "content_block_stop", index: 1 },
    {
      type: "message_delta",
      delta: { stop_reason: "end_turn" },
      usage: {
        input_tokens: 612,
        output_tokens: 2819,
        iterations: [iteration("compaction", 60385, 522), iteration("message", 612, 2819)],
      },
    },
    { type: "message_stop" },
  ]);
  const prices = { "claude-opus-4-6": { input: 5, output: 25 } };
  const { result } = await runAgent(new Agent({ model, prices }));
  expect(result.output).toBe("Summary done.");
  expect(result.usage).toMatchObject({ inputTokens: 60997, outputTokens: 3341 });
  expect(result.usage.costUsd).toBeCloseTo((60997 * 5 + 3341 * 25) / 1e6, 10);
});

it("Anthropic: a message_start while another message is open ends the run with model_error", async () => {
  const second = { ...start({ input_tokens: 17 }), message: { id: "msg_2", type: "message", content: [] } };
  const model = await messagesModel([
    start({ input_tokens: 17, output_tokens: 1 }),
    { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } },
    { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "First" } },
    second,
    { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } },
    { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "Second" } },
    { type: "content_block_stop", index: 0 },
    { type: "message_delta", delta: { stop_reason: "end_turn" }, usage: { output_tokens: 9 } },
    { type: "message_stop" },
  ]);
  const { result } = await runAgent(new Agent({ model }));
  expect(result.stopReason).toBe("model_error");
  expect(result.error).toEqual({
    code: "invalid_response",
    message: "Model API stream started message 'msg_2' while 'msg_1' was still open",
  });
});
