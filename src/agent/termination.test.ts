import { describe, expect, it } from "vitest";
import { z } from "zod";
import { Agent, type AgentEvent, defineTool } from "../index.js";
import { scriptedModel } from "../testing/index.js";

const add = defineTool({
  name: "add",
  description: "Adds two numbers.",
  parameters: z.object({ a: z.number(), b: z.number() }),
  execute: ({ a, b }) => a + b,
});
const divide = defineTool({
  name: "divide",
  description: "Divides a by b.",
  parameters: z.object({ a: z.number(), b: z.number() }),
  execute: ({ a, b }) => {
    if (b === 0) throw new Error("Division by zero");
    return a / b;
  },
});

describe("explicit mode", () => {
  it("offers the loop-breaking tools and ends with task_completion's result", async () => {
    const model = scriptedModel([
      { toolCalls: [{ name: "add", arguments: { a: 2, b: 3 } }] },
      { text: "Done.", toolCalls: [{ name: "task_completion", arguments: { result: "2 + 3 = 5" } }] },
    ]);
    const agent = new Agent({ model, tools: [add], mode: "explicit" });
    const result = await agent.run("Add 2 and 3");
    expect(result).toMatchObject({ stopReason: "task_completion", output: "2 + 3 = 5", iterations: 2 });
    expect(model.requests[0]?.tools.map((t) => t.name)).toEqual([
      "add",
      "task_completion",
      "ask_question",
      "converse",
    ]);
    expect(model.requests[0]?.system).toContain("call task_completion");
    // The loop-breaking call has its result in the history, so the conversation can go on.
    expect(result.messages.at(-1)).toMatchObject({
      role: "tool",
      name: "task_completion",
      content: "2 + 3 = 5",
    });
  });

  it("corrects a reply without a tool call and goes on", async () => {
    const model = scriptedModel([
      { text: "The answer is 5." },
      { toolCalls: [{ name: "task_completion", arguments: { result: "5" } }] },
    ]);
    const result = await new Agent({ model, mode: "explicit" }).run("2+3?");
    expect(result).toMatchObject({ stopReason: "task_completion", output: "5", iterations: 2 });
    expect(model.requests[1]?.messages.at(-1)).toEqual({
      role: "user",
      content:
        "You replied without calling a tool. Call a tool; use task_completion when done (or ask_question if you need the user's input).",
    });
  });

  it("trips the circuit breaker after three replies without a tool call", async () => {
    const model = scriptedModel(() => ({ text: "I refuse to use tools." }));
    const events: AgentEvent[] = [];
    const result = await new Agent({ model, mode: "explicit", onEvent: (e) => events.push(e) }).run("go");
    expect(result.stopReason).toBe("circuit_breaker");
    expect(result.iterations).toBe(3);
    expect(result.error?.message).toContain("no tool call");
    expect(events.at(-2)).toMatchObject({ type: "error", code: "circuit_breaker" });
    expect(events.at(-1)).toMatchObject({ type: "turn_complete", stopReason: "circuit_breaker" });
  });

  it("asks a question, stops, and continues with the user's answer", async () => {
    const model = scriptedModel([
      { toolCalls: [{ name: "ask_question", arguments: { question: "Which city?" } }] },
      { toolCalls: [{ name: "converse", arguments: { message: "Paris is lovely in spring." } }] },
    ]);
    const agent = new Agent({ model, mode: "explicit" });
    const first = await agent.run("Recommend a city break");
    expect(first).toMatchObject({ stopReason: "ask_question", output: "Which city?" });
    const second = await agent.run("Paris", { history: first.messages });
    expect(second).toMatchObject({ stopReason: "converse", output: "Paris is lovely in spring." });
    // SPEC section 9: the answer reaches the model as the result of that ask_question call.
    expect(first.messages.at(-1)).toMatchObject({ role: "assistant", toolCalls: [{ name: "ask_question" }] });
    expect(model.requests[1]?.messages.slice(-3)).toMatchObject([
      { role: "user", content: "Recommend a city break" },
      { role: "assistant", toolCalls: [{ name: "ask_question" }] },
      { role: "tool", name: "ask_question", content: "Paris", isError: false },
    ]);
  });

  it("continues a run that waits for an answer from its state, in call order with the other calls", async () => {
    const model = scriptedModel([
      {
        toolCalls: [
          { name: "ask_question", arguments: { question: "Which city?" } },
          { name: "note", arguments: { text: "Thinking about it." } },
        ],
      },
      { toolCalls: [{ name: "task_completion", arguments: { result: "Paris it is." } }] },
    ]);
    const note = defineTool({
      name: "note",
      description: "Notes something.",
      parameters: z.object({ text: z.string() }),
      execute: ({ text }) => text,
    });
    const agent = new Agent({ model, mode: "explicit", tools: [note] });
    const first = await agent.run("Pick a city");
    expect(first).toMatchObject({ stopReason: "ask_question", output: "Which city?" });
    expect(first.state.status).toBe("awaiting_answer");
    const stored = JSON.parse(JSON.stringify(first.state)); // the state is plain JSON
    const second = await agent.resume(stored, { answer: "Paris" }).result;
    expect(second).toMatchObject({ stopReason: "task_completion", output: "Paris it is.", iterations: 2 });
    expect(model.requests[1]?.messages.slice(-2)).toMatchObject([
      { role: "tool", name: "ask_question", content: "Paris" },
      { role: "tool", name: "note", content: "Thinking about it." },
    ]);
    expect(() => agent.resume(second.state)).toThrow(/has completed \(task_completion\)/);
  });

  it("rejects a user tool that clashes with a loop-breaking tool", () => {
    const clash = defineTool({
      name: "task_completion",
      description: "",
      parameters: z.object({}),
      execute: () => "",
    });
    expect(() => new Agent({ model: scriptedModel([]), tools: [clash], mode: "explicit" })).toThrow(
      "Two tools are named 'task_completion'",
    );
  });
});

describe("loop-breaking user tools", () => {
  const deploy = defineTool({
    name: "deploy",
    description: "Deploys; ends the run only when it succeeded.",
    parameters: z.object({ ok: z.boolean() }),
    loopBreaking: (_args, result) => !result.isError,
    execute: ({ ok }) => {
      if (!ok) throw new Error("deploy failed");
      return "deployed v2";
    },
  });

  it("ends the run only when the predicate says so", async () => {
    const model = scriptedModel([
      { toolCalls: [{ name: "deploy", arguments: { ok: false } }] },
      { toolCalls: [{ name: "deploy", arguments: { ok: true } }] },
    ]);
    const result = await new Agent({ model, tools: [deploy] }).run("ship it");
    expect(result).toMatchObject({ stopReason: "task_completion", output: "deployed v2", iterations: 2 });
  });

  it("treats loopBreaking: true as task completion", async () => {
    const finish = defineTool({
      name: "finish",
      description: "Ends the run.",
      parameters: z.object({ summary: z.string() }),
      loopBreaking: true,
      execute: ({ summary }) => summary,
    });
    const model = scriptedModel([{ toolCalls: [{ name: "finish", arguments: { summary: "all done" } }] }]);
    const result = await new Agent({ model, tools: [finish] }).run("go");
    expect(result).toMatchObject({ stopReason: "task_completion", output: "all done" });
  });
});

describe("circuit breaker", () => {
  it("stops after three identical failures, naming the repeated error", async () => {
    const model = scriptedModel(() => ({ toolCalls: [{ name: "divide", arguments: { a: 1, b: 0 } }] }));
    const result = await new Agent({ model, tools: [divide] }).run("1/0");
    expect(result.stopReason).toBe("circuit_breaker");
    expect(result.iterations).toBe(3);
    expect(result.error).toEqual({
      code: "circuit_breaker",
      message: 'The same error repeated 3 times in a row: divide({"a":1,"b":0}) -> Division by zero',
    });
  });

  it("is reset by a successful call and ignores different failures", async () => {
    const fail = { toolCalls: [{ name: "divide", arguments: { a: 1, b: 0 } }] };
    const model = scriptedModel([
      fail,
      fail,
      { toolCalls: [{ name: "add", arguments: { a: 1, b: 1 } }] },
      fail,
      { toolCalls: [{ name: "divide", arguments: { a: 2, b: 0 } }] },
      fail,
      { text: "I give up." },
    ]);
    const result = await new Agent({ model, tools: [add, divide], maxIterations: 20 }).run("go");
    expect(result).toMatchObject({ stopReason: "final_answer", iterations: 7 });
  });

  it("names the repeated error in one short line, however long the tool's output", async () => {
    const noisy = defineTool({
      name: "noisy",
      description: "Fails loudly.",
      parameters: z.object({}),
      execute: () => {
        throw new Error(`line one\n${"x".repeat(5000)}`);
      },
    });
    const model = scriptedModel(() => ({ toolCalls: [{ name: "noisy", arguments: {} }] }));
    const result = await new Agent({ model, tools: [noisy] }).run("go");
    expect(result.stopReason).toBe("circuit_breaker");
    expect(result.error?.message).not.toContain("\n");
    expect(result.error?.message.length).toBeLessThan(400);
    expect(result.error?.message).toContain("noisy({}) -> line one xxx");
  });

  it("honours a configured threshold", async () => {
    const model = scriptedModel(() => ({ toolCalls: [{ name: "divide", arguments: { a: 1, b: 0 } }] }));
    const result = await new Agent({
      model,
      tools: [divide],
      circuitBreakerThreshold: 5,
      maxIterations: 20,
    }).run("go");
    expect(result).toMatchObject({ stopReason: "circuit_breaker", iterations: 5 });
  });
});

describe("repetition guard", () => {
  it("warns the model after the same call three times in a row", async () => {
    const same = { toolCalls: [{ name: "add", arguments: { a: 1, b: 1 } }] };
    const model = scriptedModel([same, same, same, { text: "ok, 2" }]);
    const result = await new Agent({ model, tools: [add] }).run("go");
    expect(result.stopReason).toBe("final_answer");
    const warningsBefore = (call: number) =>
      model.requests[call]?.messages.filter((m) => m.role === "user" && m.content.startsWith("Warning:")) ??
      [];
    expect(warningsBefore(2)).toHaveLength(0);
    expect(warningsBefore(3)).toEqual([
      {
        role: "user",
        content:
          "Warning: you have made this exact call (add with the same arguments) 3 times in a row. Repeating it will not give a different result: use the result you already have, try a different approach, or finish.",
      },
    ]);
  });

  it("does not warn when the arguments change", async () => {
    const model = scriptedModel([
      { toolCalls: [{ name: "add", arguments: { a: 1, b: 1 } }] },
      { toolCalls: [{ name: "add", arguments: { a: 1, b: 2 } }] },
      { toolCalls: [{ name: "add", arguments: { a: 1, b: 1 } }] },
      { text: "done" },
    ]);
    await new Agent({ model, tools: [add] }).run("go");
    expect(
      model.requests[3]?.messages.some((m) => m.role === "user" && m.content.startsWith("Warning:")),
    ).toBe(false);
  });
});

describe("prompt assembly", () => {
  it("warns when few iterations remain and keeps everything before the warning byte-identical", async () => {
    const model = scriptedModel(() => ({ toolCalls: [{ name: "add", arguments: { a: 1, b: 1 } }] }));
    const agent = new Agent({ model, instructions: "Be careful.", tools: [add, divide], maxIterations: 10 });
    const result = await agent.run("loop", { signal: AbortSignal.timeout(10_000) });
    expect(result.stopReason).toBe("max_iterations");
    const systems = model.requests.map((r) => r.system);
    expect(systems.slice(0, 8).every((s) => s === "Be careful.")).toBe(true);
    expect(systems[8]).toBe(
      "Be careful.\n\nOnly 2 iterations remain, this one included (iteration 9 of 10). Wrap up: give your final answer now, without further tool calls.",
    );
    expect(systems[9]).toBe(
      "Be careful.\n\nThis is your last iteration (iteration 10 of 10). Wrap up: give your final answer now, without further tool calls.",
    );
    const toolLists = new Set(model.requests.map((r) => JSON.stringify(r.tools)));
    expect(toolLists.size).toBe(1);
    expect(model.requests[0]?.tools.map((t) => t.name)).toEqual(["add", "divide"]);
  });

  it("warns from 20% of a larger limit, in explicit mode with task_completion", async () => {
    const model = scriptedModel(() => ({ toolCalls: [{ name: "add", arguments: { a: 1, b: 2 } }] }));
    const agent = new Agent({
      model,
      tools: [add],
      mode: "explicit",
      maxIterations: 20,
      repetitionThreshold: 100,
    });
    await agent.run("go");
    const warned = model.requests.map((r) => r.system.includes("Wrap up"));
    expect(warned.indexOf(true)).toBe(16); // iteration 17: 4 remain, this one included
    expect(model.requests[19]?.system).toMatch(/call task_completion with your result now\.$/);
  });
});

describe("metrics and long runs", () => {
  it("records every iteration", async () => {
    const model = scriptedModel([
      {
        toolCalls: [
          { name: "divide", arguments: { a: 1, b: 0 } },
          { name: "add", arguments: { a: 1, b: 1 } },
        ],
        usage: { inputTokens: 10, outputTokens: 5 },
      },
      { text: "done", usage: { inputTokens: 20, outputTokens: 2 } },
    ]);
    const result = await new Agent({ model, tools: [add, divide] }).run("go");
    expect(result.steps).toHaveLength(2);
    expect(result.steps[0]).toMatchObject({
      iteration: 1,
      toolCalls: 2,
      toolErrors: 1,
      finishReason: "tool_calls",
      usage: { inputTokens: 10 },
    });
    expect(result.steps[1]).toMatchObject({
      iteration: 2,
      toolCalls: 0,
      toolErrors: 0,
      finishReason: "stop",
    });
    expect(result.usage).toEqual({ inputTokens: 30, outputTokens: 7 });
  });

  it("runs 10,000 iterations with a flat stack", async () => {
    const depths: number[] = [];
    const probe = defineTool({
      name: "probe",
      description: "Records the stack depth.",
      parameters: z.object({ n: z.number() }),
      execute: ({ n }) => {
        if (n === 1 || n === 10_000) {
          const limit = Error.stackTraceLimit;
          Error.stackTraceLimit = Number.POSITIVE_INFINITY;
          depths.push(new Error().stack?.split("\n").length ?? 0);
          Error.stackTraceLimit = limit;
        }
        return "ok";
      },
    });
    const model = scriptedModel((_request, index) => ({
      toolCalls: [{ name: "probe", arguments: { n: index + 1 } }],
    }));
    const result = await new Agent({
      model,
      tools: [probe],
      maxIterations: 10_000,
      repetitionThreshold: 3,
    }).run("go");
    expect(result).toMatchObject({ stopReason: "max_iterations", iterations: 10_000 });
    expect(result.messages).toHaveLength(1 + 2 * 10_000);
    expect(depths).toHaveLength(2);
    expect(depths[1]).toBe(depths[0]);
  });
});

describe("budgets", () => {
  const loop = () => ({
    toolCalls: [{ name: "add", arguments: { a: 1, b: Math.random() } }],
    usage: { inputTokens: 300, outputTokens: 100 },
  });

  it("warns at 80% of the token budget and stops with budget_exceeded when it is spent", async () => {
    const model = scriptedModel(loop);
    const events: AgentEvent[] = [];
    const agent = new Agent({
      model,
      tools: [add],
      maxIterations: 50,
      budget: { maxTokens: 2000 },
      onEvent: (e) => events.push(e),
    });
    const result = await agent.run("go");
    expect(result).toMatchObject({ stopReason: "budget_exceeded", iterations: 5 });
    expect(result.error).toEqual({
      code: "budget_exceeded",
      message: "Token budget spent: 2000 of 2000 tokens.",
    });
    const warned = model.requests.map((r) => r.system.includes("Budget nearly spent"));
    expect(warned).toEqual([false, false, false, false, true]); // 1600 of 2000 spent before call 5
    expect(model.requests[4]?.system).toContain("1600 of 2000 tokens");
    expect(events.at(-1)).toMatchObject({ type: "turn_complete", stopReason: "budget_exceeded" });
  });

  it("counts cost from the price table and stops at the cost budget", async () => {
    const model = scriptedModel(loop, { id: "my-model" });
    const prices = { "my-model": { input: 1000, output: 2000 } }; // $0.3 + $0.2 per call
    const result = await new Agent({ model, tools: [add], maxIterations: 50, prices }).run("go", {
      budget: { maxCostUsd: 1.2 },
    });
    expect(result.stopReason).toBe("budget_exceeded");
    expect(result.iterations).toBe(3);
    expect(result.usage.costUsd).toBeCloseTo(1.5);
    expect(result.steps[0]?.usage.costUsd).toBeCloseTo(0.5);
  });

  it("knows the prices of common models, dated versions included", async () => {
    const model = scriptedModel([{ text: "hi", usage: { inputTokens: 1_000_000, outputTokens: 0 } }], {
      id: "gpt-4o-mini-2024-07-18",
    });
    const result = await new Agent({ model }).run("hi");
    expect(result.usage.costUsd).toBeCloseTo(0.15);
  });

  it("refuses a cost budget without a price, and bad budget values", () => {
    const model = scriptedModel([], { id: "mystery-model" });
    expect(() => new Agent({ model, budget: { maxCostUsd: 1 } })).toThrow(
      `A cost budget needs the price of model 'mystery-model': pass prices: { "mystery-model": { input, output } } in USD per million tokens.`,
    );
    expect(() => new Agent({ model, budget: { maxTokens: -5 } })).toThrow(
      "budget.maxTokens must be a positive number",
    );
  });
});
