import type OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { Agent, type AgentOptions, defineTool } from "../src/index.js";
import { type ScriptedStep, scriptedModel } from "../src/testing/index.js";
import { builtinTools } from "../src/tools/builtin/index.js";
import { listen } from "./support/listen.js";

/** Serves the app on a random loopback port; returns an official OpenAI client for it. */
type ChunkWithEvent = OpenAI.Chat.Completions.ChatCompletionChunk & {
  agentloop?: { type: string; [field: string]: unknown };
};

/** POSTs a streaming request and returns the raw SSE body with its parsed data events. */
async function rawStream(baseURL: string, request: object) {
  const res = await fetch(`${baseURL}/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ ...request, stream: true }),
  });
  const text = await res.text();
  const data = [...text.matchAll(/^data: (.*)$/gm)].map((m) => m[1] as string);
  const chunks = data.filter((d) => d !== "[DONE]").map((d) => JSON.parse(d) as ChunkWithEvent);
  return { res, text, data, chunks };
}

const calculatorAgent = (steps: ScriptedStep[] | (() => ScriptedStep), options: Partial<AgentOptions> = {}) =>
  new Agent({ model: scriptedModel(steps), tools: builtinTools(), ...options });
const user = (content: string) => ({ messages: [{ role: "user" as const, content }] });

interface ErrorBody {
  error: { message: string; type: string; code: string | null; param: string | null };
}
const errorOf = async (res: Response) => ((await res.json()) as ErrorBody).error;

describe("OpenAI-compatible server, through the official client", () => {
  const toolThenAnswer: ScriptedStep[] = [
    {
      text: "Let me compute.",
      toolCalls: [{ id: "c1", name: "calculator", arguments: { expression: "157.09 * 493.89" } }],
      usage: { inputTokens: 10, outputTokens: 5 },
    },
    { text: "It is 77585.1801.", usage: { inputTokens: 20, outputTokens: 3 } },
  ];

  it("answers without streaming, with the client's system message after the agent's instructions", async () => {
    const model = scriptedModel(toolThenAnswer);
    const agent = new Agent({ model, tools: builtinTools(), instructions: "You are exact." });
    const { client } = await listen({ agents: { calc: agent } });
    const completion = await client.chat.completions.create({
      model: "calc",
      messages: [
        { role: "system", content: "Answer briefly." },
        { role: "user", content: "157.09 * 493.89?" },
      ],
    });
    expect(completion.object).toBe("chat.completion");
    expect(completion.model).toBe("calc");
    // The same content as the stream: the narration before the tool call, then the answer.
    expect(completion.choices[0]?.message.content).toBe("Let me compute.\n\nIt is 77585.1801.");
    expect(completion.choices[0]?.finish_reason).toBe("stop");
    expect(completion.usage).toMatchObject({ prompt_tokens: 30, completion_tokens: 8, total_tokens: 38 });
    expect((completion as unknown as ChunkWithEvent).agentloop).toMatchObject({
      type: "turn_complete",
      stopReason: "final_answer",
      iterations: 2,
    });
    expect(model.requests[0]?.system.startsWith("You are exact.\n\nAnswer briefly.")).toBe(true);
  });

  it("streams content deltas, tool events in `agentloop`, the finish chunk, a usage chunk and [DONE]", async () => {
    const { client, baseURL } = await listen({
      agents: { calc: calculatorAgent(toolThenAnswer), echo: calculatorAgent(() => ({ text: "hello" })) },
    });
    const stream = await client.chat.completions.create({
      model: "calc",
      ...user("157.09 * 493.89?"),
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks: ChunkWithEvent[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks[0]?.choices[0]?.delta).toEqual({ role: "assistant", content: "" });
    const contentChunks = chunks.filter((c) => c.choices[0]?.delta.content);
    expect(contentChunks.length).toBeGreaterThan(2); // streamed in deltas, not at once
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? "").join("")).toBe(
      "Let me compute.\n\nIt is 77585.1801.",
    );
    const events = chunks.flatMap((c) => (c.agentloop ? [c] : []));
    expect(events.map((c) => c.agentloop?.type)).toEqual(["tool_call", "tool_result", "turn_complete"]);
    expect(events[0]?.choices[0]?.delta).toEqual({});
    // The run's id is the completion's id (SPEC section 9), on every event.
    expect(events[0]?.agentloop).toEqual({
      type: "tool_call",
      id: "c1",
      name: "calculator",
      arguments: { expression: "157.09 * 493.89" },
      runId: events[0]?.id,
    });
    expect(events.every((c) => c.agentloop?.runId === c.id)).toBe(true);
    expect(events[1]?.agentloop).toMatchObject({
      type: "tool_result",
      content: "77585.1801",
      isError: false,
    });
    const finish = events[2];
    expect(finish?.choices[0]?.finish_reason).toBe("stop");
    expect(finish?.agentloop).toMatchObject({
      stopReason: "final_answer",
      iterations: 2,
      usage: { inputTokens: 30 },
    });
    const usage = chunks.at(-1);
    expect(usage?.choices).toEqual([]);
    expect(usage?.usage).toMatchObject({ prompt_tokens: 30, completion_tokens: 8, total_tokens: 38 });

    // On the wire: `data: {...}\n\n` events ending with `data: [DONE]`, one id for all chunks.
    const raw = await rawStream(baseURL, { model: "echo", ...user("again") });
    expect(raw.res.headers.get("content-type")).toContain("text/event-stream");
    expect(raw.text.endsWith("data: [DONE]\n\n")).toBe(true);
    expect(new Set(raw.chunks.map((c) => c.id)).size).toBe(1);
    expect(raw.chunks.every((c) => c.object === "chat.completion.chunk")).toBe(true);
    expect(raw.chunks.some((c) => c.usage)).toBe(false); // no usage chunk unless asked
  });

  it("maps every stop reason to finish_reason", async () => {
    const loopForever = () => ({ toolCalls: [{ name: "calculator", arguments: { expression: "1+1" } }] });
    const hang = defineTool({
      name: "hang",
      description: "Waits until aborted.",
      parameters: z.object({}),
      execute: (_args, { signal }) =>
        new Promise((_, reject) => signal.addEventListener("abort", () => reject(new Error("aborted")))),
    });
    const breaking = (tool: string, args: Record<string, unknown>) => () => ({
      toolCalls: [{ name: tool, arguments: args }],
    });
    const agents = {
      final: calculatorAgent([{ text: "Done." }]),
      ask: calculatorAgent(breaking("ask_question", { question: "Which city?" }), { mode: "explicit" }),
      complete: calculatorAgent(breaking("task_completion", { result: "All set." }), { mode: "explicit" }),
      converse: calculatorAgent(breaking("converse", { message: "Hello!" }), { mode: "explicit" }),
      limit: calculatorAgent(loopForever, { maxIterations: 2, repetitionThreshold: 100 }),
      budget: calculatorAgent(() => ({ ...loopForever(), usage: { inputTokens: 60, outputTokens: 60 } }), {
        budget: { maxTokens: 100 },
      }),
      timeout: new Agent({
        model: scriptedModel([{ toolCalls: [{ name: "hang" }] }]),
        tools: [hang],
        budget: { timeoutMs: 50 },
      }),
    };
    const expected = {
      final: ["final_answer", "stop", "Done."],
      ask: ["ask_question", "stop", "Which city?"],
      complete: ["task_completion", "stop", "All set."],
      converse: ["converse", "stop", "Hello!"],
      limit: ["max_iterations", "length", ""],
      budget: ["budget_exceeded", "length", ""],
      timeout: ["aborted", "length", ""],
    } as const;
    const { client, baseURL } = await listen({ agents });
    for (const [model, [stopReason, reason, content]] of Object.entries(expected)) {
      const completion = await client.chat.completions.create({ model, ...user("go") });
      expect(completion.choices[0], model).toMatchObject({ finish_reason: reason, message: { content } });
      expect((completion as unknown as ChunkWithEvent).agentloop?.stopReason, model).toBe(stopReason);
    }
    // Streaming: the question of ask_question arrives as content, before the finish chunk.
    const { chunks } = await rawStream(baseURL, { model: "ask", ...user("trip") });
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? "").join("")).toBe("Which city?");
    expect(chunks.at(-1)?.choices[0]?.finish_reason).toBe("stop");
    expect(chunks.at(-1)?.agentloop).toMatchObject({ type: "turn_complete", stopReason: "ask_question" });
  });

  it("answers circuit_breaker and model_error with a 502 before streaming, and an error chunk after", async () => {
    const broken = () =>
      calculatorAgent(() => ({ error: { code: "http_500", message: "Model API error (HTTP 500): boom" } }));
    const agents = {
      broken: broken(),
      brokenStream: broken(),
      // Explicit mode, replies without text or a tool call: the breaker trips with nothing streamed.
      silent: calculatorAgent(() => ({}), { mode: "explicit" }),
      silentStream: calculatorAgent(() => ({}), { mode: "explicit" }),
      late: calculatorAgent([
        { text: "Working on it.", toolCalls: [{ name: "calculator", arguments: { expression: "1+1" } }] },
        { error: { code: "http_500", message: "boom later" } },
      ]),
      failing: calculatorAgent(() => ({
        toolCalls: [{ name: "calculator", arguments: { expression: "1/" } }],
      })),
    };
    const { client, baseURL } = await listen({ agents });
    for (const [model, stream, code] of [
      ["broken", false, "model_error"],
      ["brokenStream", true, "model_error"],
      ["silent", false, "circuit_breaker"],
      ["silentStream", true, "circuit_breaker"],
    ] as const) {
      const res = await fetch(`${baseURL}/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model, ...user("hi"), stream }),
      });
      expect(res.status, model).toBe(502);
      expect(res.headers.get("x-should-retry")).toBe("false");
      expect(await errorOf(res)).toMatchObject({ type: "upstream_error", code });
    }
    await expect(client.chat.completions.create({ model: "broken", ...user("hi") })).rejects.toMatchObject({
      status: 502,
      error: {
        message: "Model API error (HTTP 500): boom",
        type: "upstream_error",
        code: "model_error",
        param: null,
      },
    });

    for (const [model, code] of [
      ["late", "http_500"],
      ["failing", "circuit_breaker"],
    ] as const) {
      const stream = await client.chat.completions.create({ model, ...user("hi"), stream: true });
      const chunks: ChunkWithEvent[] = [];
      for await (const chunk of stream) chunks.push(chunk);
      // The run's turn_complete, then the error event as the last chunk.
      expect(chunks.at(-2)?.agentloop).toMatchObject({ type: "turn_complete" });
      expect(chunks.at(-1)?.agentloop, model).toMatchObject({ type: "error", code });
      expect(chunks.at(-1)?.choices[0]?.finish_reason).toBe("stop");
    }
  });

  it("lists and retrieves models, and sends requests without `model` to the first agent", async () => {
    const { client } = await listen({
      agents: { first: calculatorAgent([{ text: "hi" }]), second: calculatorAgent([]) },
    });
    const models = [];
    for await (const m of client.models.list()) models.push(m.id);
    expect(models).toEqual(["first", "second"]);
    expect(await client.models.retrieve("second")).toMatchObject({ id: "second", object: "model" });
    await expect(client.models.retrieve("nope")).rejects.toMatchObject({ status: 404 });
    const res = await fetch(`${client.baseURL}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(user("hello")),
    });
    expect(((await res.json()) as { model: string }).model).toBe("first");
  });
});
