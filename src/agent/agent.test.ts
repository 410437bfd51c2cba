import { describe, expect, it } from "vitest";
import { z } from "zod";
import { Agent, type AgentEventBody, defineTool, type RunResult } from "../index.js";
import { scriptedModel } from "../testing/index.js";

const add = defineTool({
  name: "add",
  description: "Adds two numbers.",
  parameters: z.object({ a: z.number(), b: z.number() }),
  execute: ({ a, b }) => a + b,
});

async function collect(
  agent: Agent,
  input: string,
  options = {},
): Promise<{ events: AgentEventBody[]; result: RunResult }> {
  const events: AgentEventBody[] = [];
  const run = agent.stream(input, options);
  for await (const { runId, ...event } of run) {
    expect(runId).toBe(run.runId); // every event carries its run's id
    events.push(event as AgentEventBody);
  }
  return { events, result: await run.result };
}

describe("Agent loop", () => {
  it("answers without tools in one model call", async () => {
    const model = scriptedModel([
      { text: "Paris is the capital of France.", usage: { inputTokens: 12, outputTokens: 7 } },
    ]);
    const agent = new Agent({ model, instructions: "Be brief.", tools: [add] });
    const { events, result } = await collect(agent, "Capital of France?");
    expect(result).toMatchObject({
      output: "Paris is the capital of France.",
      stopReason: "final_answer",
      iterations: 1,
    });
    expect(result.usage).toEqual({ inputTokens: 12, outputTokens: 7 });
    expect(model.requests).toHaveLength(1);
    expect(model.requests[0]?.system).toBe("Be brief.");
    expect(model.requests[0]?.tools.map((t) => t.name)).toEqual(["add"]);
    const deltas = events.filter((e) => e.type === "message_delta").map((e) => e.text);
    expect(deltas.length).toBeGreaterThan(1);
    expect(deltas.join("")).toBe("Paris is the capital of France.");
    expect(events.map((e) => e.type)).toEqual([
      "iteration_start",
      ...deltas.map(() => "message_delta"),
      "message",
      "turn_complete",
    ]);
    expect(events.at(-1)).toEqual({
      type: "turn_complete",
      stopReason: "final_answer",
      iterations: 1,
      output: "Paris is the capital of France.",
      usage: { inputTokens: 12, outputTokens: 7 },
    });
  });

  it("runs a tool and feeds its result back with the call id", async () => {
    const model = scriptedModel([
      { thinking: "I should add.", toolCalls: [{ id: "c1", name: "add", arguments: { a: 2, b: 3 } }] },
      { text: "The sum is 5." },
    ]);
    const { events, result } = await collect(new Agent({ model, tools: [add] }), "2+3?");
    expect(result.stopReason).toBe("final_answer");
    expect(result.output).toBe("The sum is 5.");
    expect(result.iterations).toBe(2);
    expect(result.messages).toEqual([
      { role: "user", content: "2+3?" },
      {
        role: "assistant",
        content: "",
        thinking: "I should add.",
        toolCalls: [{ id: "c1", name: "add", arguments: '{"a":2,"b":3}' }],
      },
      { role: "tool", toolCallId: "c1", name: "add", content: "5", isError: false },
      { role: "assistant", content: "The sum is 5." },
    ]);
    expect(model.requests[1]?.messages.at(-1)).toMatchObject({
      role: "tool",
      toolCallId: "c1",
      content: "5",
    });
    expect(
      events
        .filter((e) => e.type === "thinking")
        .map((e) => e.text)
        .join(""),
    ).toBe("I should add.");
    expect(events.find((e) => e.type === "tool_call")).toEqual({
      type: "tool_call",
      id: "c1",
      name: "add",
      arguments: { a: 2, b: 3 },
    });
    expect(events.find((e) => e.type === "tool_result")).toMatchObject({
      type: "tool_result",
      id: "c1",
      name: "add",
      content: "5",
      isError: false,
    });
    expect(events.filter((e) => e.type === "turn_complete")).toHaveLength(1);
  });

  it("appends parallel results in call order even when the first finishes last", async () => {
    const finished: string[] = [];
    const wait = defineTool({
      name: "wait",
      description: "Waits for the given ticks.",
      parameters: z.object({ label: z.string(), ticks: z.number() }),
      execute: async ({ label, ticks }) => {
        for (let i = 0; i < ticks; i++) await new Promise((resolve) => setImmediate(resolve));
        finished.push(label);
        return label;
      },
    });
    const model = scriptedModel([
      {
        toolCalls: [
          { id: "slow", name: "wait", arguments: { label: "slow", ticks: 20 } },
          { id: "fast", name: "wait", arguments: { label: "fast", ticks: 0 } },
          { id: "mid", name: "wait", arguments: { label: "mid", ticks: 5 } },
        ],
      },
      { text: "done" },
    ]);
    const { events, result } = await collect(new Agent({ model, tools: [wait] }), "go");
    expect(finished).toEqual(["fast", "mid", "slow"]);
    expect(events.filter((e) => e.type === "tool_result").map((e) => e.id)).toEqual(["fast", "mid", "slow"]);
    const toolMessages = result.messages.filter((m) => m.role === "tool");
    expect(toolMessages.map((m) => m.toolCallId)).toEqual(["slow", "fast", "mid"]);
    expect(toolMessages.map((m) => m.content)).toEqual(["slow", "fast", "mid"]);
  });

  it("turns every kind of failed call into an error result the model reads", async () => {
    const boom = defineTool({
      name: "boom",
      description: "Always fails.",
      parameters: z.object({}),
      execute: () => {
        throw new Error("disk on fire");
      },
    });
    const model = scriptedModel([
      {
        toolCalls: [
          { id: "u", name: "nope", arguments: {} },
          { id: "j", name: "add", arguments: '{"a": 1, "b":' },
          { id: "s", name: "add", arguments: { a: 1, b: "two" } },
          { id: "t", name: "boom", arguments: {} },
          { id: "ok", name: "add", arguments: { a: 1, b: 1 } },
        ],
      },
      { text: "recovered" },
    ]);
    const { events, result } = await collect(new Agent({ model, tools: [add, boom] }), "try");
    expect(result.stopReason).toBe("final_answer");
    const results = result.messages.filter((m) => m.role === "tool");
    expect(results.map((m) => [m.toolCallId, m.isError])).toEqual([
      ["u", true],
      ["j", true],
      ["s", true],
      ["t", true],
      ["ok", false],
    ]);
    const [unknown, json, schema, thrown] = results.map((m) => m.content);
    expect(unknown).toBe("Unknown tool 'nope'. Available tools: add, boom.");
    expect(json).toMatch(
      /^Invalid JSON in the arguments of 'add' \("\{\\"a\\": 1, \\"b\\":"\): .+Send the arguments as one JSON object\.$/,
    );
    expect(schema).toMatch(/^Invalid arguments for 'add': b: /);
    expect(thrown).toBe("disk on fire");
    expect(events.find((e) => e.type === "tool_call" && e.id === "j")).toMatchObject({ arguments: {} });
    // The model saw every error on its next call.
    expect(model.requests[1]?.messages.filter((m) => m.role === "tool")).toHaveLength(5);
  });

  it("times out a tool that hangs and goes on", async () => {
    const hang = defineTool({
      name: "hang",
      description: "Never returns.",
      parameters: z.object({}),
      timeoutMs: 20,
      execute: () => new Promise(() => {}),
    });
    const model = scriptedModel([{ toolCalls: [{ name: "hang", arguments: {} }] }, { text: "gave up" }]);
    const result = await new Agent({ model, tools: [hang] }).run("wait");
    expect(result.messages[2]).toMatchObject({
      role: "tool",
      isError: true,
      content: "Tool 'hang' timed out after 20 ms.",
    });
    expect(result.output).toBe("gave up");
  });

  it("truncates a huge result with a visible marker", async () => {
    const huge = defineTool({
      name: "huge",
      description: "Returns a lot.",
      parameters: z.object({}),
      execute: () => "x".repeat(100_000),
    });
    const model = scriptedModel([{ toolCalls: [{ name: "huge" }] }, { text: "ok" }]);
    const result = await new Agent({ model, tools: [huge] }).run("go");
    const content = (result.messages[2] as { content: string }).content;
    expect(content.startsWith("x".repeat(32_000))).toBe(true);
    expect(content).toContain("[truncated: showing 32000 of 100000 characters]");
    expect(content.length).toBeLessThan(32_100);
  });

  it("serialises non-string results as JSON", async () => {
    const info = defineTool({
      name: "info",
      description: "Returns an object.",
      parameters: { type: "object", properties: { q: { type: "string" } }, required: ["q"] },
      execute: (args) => ({ echo: args.q, n: 1 }),
    });
    const model = scriptedModel([
      {
        toolCalls: [
          { name: "info", arguments: { q: "hi" } },
          { name: "info", arguments: { q: 3 } },
        ],
      },
      { text: "ok" },
    ]);
    const result = await new Agent({ model, tools: [info] }).run("go");
    expect(result.messages[2]).toMatchObject({ content: '{"echo":"hi","n":1}', isError: false });
    expect(result.messages[3]).toMatchObject({ isError: true });
    expect((result.messages[3] as { content: string }).content).toMatch(/^Invalid arguments for 'info': q: /);
  });

  it("stops at max iterations with the last assistant text", async () => {
    const model = scriptedModel(() => ({
      text: "still working",
      toolCalls: [{ name: "add", arguments: { a: 1, b: 1 } }],
    }));
    const { events, result } = await collect(new Agent({ model, tools: [add], maxIterations: 3 }), "loop");
    expect(result).toMatchObject({ stopReason: "max_iterations", iterations: 3, output: "still working" });
    expect(model.requests).toHaveLength(3);
    expect(events.filter((e) => e.type === "iteration_start")).toHaveLength(3);
    expect(events.at(-1)).toMatchObject({ type: "turn_complete", stopReason: "max_iterations" });
  });

  it("aborts in the middle of a tool, settling every call", async () => {
    const controller = new AbortController();
    let toolSignal: AbortSignal | undefined;
    const slow = defineTool({
      name: "slow",
      description: "Waits until aborted.",
      parameters: z.object({}),
      execute: (_args, { signal }) => {
        toolSignal = signal;
        controller.abort();
        return new Promise(() => {});
      },
    });
    const model = scriptedModel([
      {
        toolCalls: [
          { id: "a", name: "slow" },
          { id: "b", name: "add", arguments: { a: 1, b: 2 } },
        ],
      },
    ]);
    const { events, result } = await collect(new Agent({ model, tools: [slow, add] }), "go", {
      signal: controller.signal,
    });
    expect(result.stopReason).toBe("aborted");
    expect(toolSignal?.aborted).toBe(true);
    // No call is left without a result, so the history can be continued.
    expect(result.messages.filter((m) => m.role === "tool").map((m) => m.toolCallId)).toEqual(["a", "b"]);
    expect(result.messages[2]).toMatchObject({ isError: true, content: "The run was aborted." });
    expect(events.at(-1)).toMatchObject({ type: "turn_complete", stopReason: "aborted" });
  });

  it("aborts when the run's time limit passes", async () => {
    const model = scriptedModel([{ toolCalls: [{ name: "hang" }] }]);
    const hang = defineTool({
      name: "hang",
      description: "Hangs.",
      parameters: z.object({}),
      execute: () => new Promise(() => {}),
    });
    const result = await new Agent({ model, tools: [hang] }).run("go", { budget: { timeoutMs: 30 } });
    expect(result.stopReason).toBe("aborted");
  });

  it("ends with model_error and an error event when the model fails", async () => {
    const model = scriptedModel([
      { error: { code: "http_500", message: "Model API error (HTTP 500): boom", status: 500 } },
    ]);
    const { events, result } = await collect(new Agent({ model }), "hi");
    expect(result.stopReason).toBe("model_error");
    expect(result.error).toEqual({ code: "http_500", message: "Model API error (HTTP 500): boom" });
    expect(events.map((e) => e.type)).toEqual(["iteration_start", "error", "turn_complete"]);
  });

  it("continues a previous run's conversation", async () => {
    const model = scriptedModel([{ text: "Hello Ada." }, { text: "Your name is Ada." }]);
    const agent = new Agent({ model });
    const first = await agent.run("I am Ada.");
    const second = await agent.run("What is my name?", { history: first.messages });
    expect(second.output).toBe("Your name is Ada.");
    expect(model.requests[1]?.messages.map((m) => m.content)).toEqual([
      "I am Ada.",
      "Hello Ada.",
      "What is my name?",
    ]);
    expect(first.messages).toHaveLength(2);
  });

  it("reports every event to onEvent", async () => {
    const seen: string[] = [];
    const model = scriptedModel([{ text: "hi" }]);
    await new Agent({ model, onEvent: (e) => seen.push(e.type) }).run("hello");
    expect(seen).toEqual(["iteration_start", "message_delta", "message", "turn_complete"]);
  });

  it("runs sequential tools alone", async () => {
    let active = 0;
    let most = 0;
    const exclusive = defineTool({
      name: "exclusive",
      description: "Must run alone.",
      parameters: z.object({}),
      sequential: true,
      execute: async () => {
        active++;
        most = Math.max(most, active);
        await new Promise((resolve) => setImmediate(resolve));
        active--;
        return "ok";
      },
    });
    const model = scriptedModel([
      { toolCalls: [{ name: "exclusive" }, { name: "exclusive" }, { name: "exclusive" }] },
      { text: "ok" },
    ]);
    const result = await new Agent({ model, tools: [exclusive] }).run("go");
    expect(most).toBe(1);
    expect(result.messages.filter((m) => m.role === "tool")).toHaveLength(3);
  });

  it("rejects duplicate tool names and bad options with a clear error", () => {
    const model = scriptedModel([]);
    expect(() => new Agent({ model, tools: [add, add] })).toThrow("Two tools are named 'add'");
    expect(() => new Agent({ model, maxIterations: 0 })).toThrow("maxIterations must be a positive integer");
    expect(() =>
      defineTool({ name: "bad name", description: "", parameters: z.object({}), execute: () => "" }),
    ).toThrow("Tool name 'bad name' is invalid");
  });
  it("streams a tool's progress reports as tool_progress events before its result", async () => {
    const long = defineTool({
      name: "long",
      description: "Reports progress.",
      parameters: z.object({}),
      execute: async (_args, { onProgress }) => {
        onProgress?.({ progress: 1, total: 2, message: "half way" });
        await new Promise((resolve) => setImmediate(resolve));
        onProgress?.({ progress: 2, total: 2 });
        return "finished";
      },
    });
    const model = scriptedModel([{ toolCalls: [{ id: "p", name: "long" }] }, { text: "ok" }]);
    const { events } = await collect(new Agent({ model, tools: [long] }), "go");
    const toolEvents = events.filter((e) => e.type.startsWith("tool_"));
    expect(toolEvents).toMatchObject([
      { type: "tool_call", id: "p" },
      { type: "tool_progress", id: "p", name: "long", progress: 1, total: 2, message: "half way" },
      { type: "tool_progress", id: "p", progress: 2, total: 2 },
      { type: "tool_result", id: "p", content: "finished" },
    ]);
  });
  it("prunes what it sends to the context window while the result keeps the whole history", async () => {
    const model = scriptedModel((_request, index) =>
      index < 40
        ? { text: "x ".repeat(200), toolCalls: [{ name: "add", arguments: { a: index, b: 1 } }] }
        : { text: "done" },
    );
    const agent = new Agent({ model, tools: [add], maxIterations: 50, maxContextTokens: 2000 });
    const result = await agent.run("the task");
    expect(result.stopReason).toBe("final_answer");
    expect(result.messages).toHaveLength(1 + 40 * 2 + 1);
    const last = model.requests.at(-1)?.messages ?? [];
    expect(last.length).toBeLessThan(result.messages.length);
    expect(last[0]).toEqual({ role: "user", content: "the task" });
    expect(last[1]?.content).toMatch(/^\[\d+ earlier messages omitted/);
    expect(last.at(-1)).toMatchObject({ role: "tool" });
  });
  it("reads a tools function at the start of every run", async () => {
    let catalogue = [add];
    const model = scriptedModel([{ text: "one" }, { text: "two" }]);
    const agent = new Agent({ model, tools: () => catalogue });
    await agent.run("first");
    const sub = defineTool({
      name: "sub",
      description: "Subtracts.",
      parameters: z.object({}),
      execute: () => 0,
    });
    catalogue = [add, sub];
    await agent.run("second");
    expect(model.requests.map((r) => r.tools.map((t) => t.name))).toEqual([["add"], ["add", "sub"]]);
  });
});
