import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { Agent, AgentloopError, contextManager, defineTool, type Message } from "../index.js";
import { createTokenCounter } from "../memory/tokens.js";
import { scriptedModel } from "../testing/index.js";

const add = defineTool({
  name: "add",
  description: "Adds two numbers.",
  parameters: z.object({ a: z.number(), b: z.number() }),
  execute: ({ a, b }) => `${a + b}`.repeat(50),
});

/** Three tool calls, then an answer. */
const threeCalls = () =>
  scriptedModel((_request, index) =>
    index < 3 ? { toolCalls: [{ name: "add", arguments: { a: index, b: 1 } }] } : { text: "done" },
  );

describe("AgentOptions.context", () => {
  it("a transform decides what each request sends; the run keeps the whole history", async () => {
    const model = threeCalls();
    const seen: { length: number; system: string; tools: string[] }[] = [];
    const agent = new Agent({
      model,
      instructions: "Be brief.",
      tools: [add],
      context: (history, { system, tools, signal }) => {
        expect(signal).toBeInstanceOf(AbortSignal);
        seen.push({ length: history.length, system, tools: tools.map((t) => t.name) });
        return [history[0] as Message, ...history.slice(-1)];
      },
    });
    const result = await agent.run("the task");
    expect(result.stopReason).toBe("final_answer");
    expect(seen.map((s) => s.length)).toEqual([1, 3, 5, 7]);
    expect(seen[0]).toMatchObject({ tools: ["add"] });
    expect(seen[0]?.system).toContain("Be brief.");
    expect(model.requests.map((r) => r.messages.length)).toEqual([2, 2, 2, 2]);
    expect(model.requests[3]?.messages[0]).toEqual({ role: "user", content: "the task" });
    expect(model.requests[3]?.messages[1]).toMatchObject({ role: "tool" });
    expect(result.messages).toHaveLength(8);
    // Tool results are cut by maxToolResultChars only.
    expect(result.messages[2]).toMatchObject({ role: "tool", content: "1".repeat(50) });
  });

  it("an async transform is awaited", async () => {
    const model = scriptedModel([{ text: "ok" }]);
    const notes: Message = { role: "user", content: "Notes: the user likes tea." };
    const agent = new Agent({ model, context: async (history) => [notes, ...history] });
    await agent.run("hi");
    expect(model.requests[0]?.messages).toEqual([notes, { role: "user", content: "hi" }]);
  });

  it("plugs in a contextManager({ ... }) of one's own (here: a counter of one token per character)", async () => {
    const model = threeCalls();
    const counter = createTokenCounter((text) => text.length);
    const context = contextManager({ modelId: "m", maxContextTokens: 300, reserveTokens: 0, counter });
    const result = await new Agent({ model, tools: [add], context }).run("the task");
    expect(result.messages).toHaveLength(8);
    const last = model.requests.at(-1)?.messages ?? [];
    expect(last.length).toBeLessThan(8);
    expect(last[1]?.content).toMatch(/^\[\d+ earlier messages omitted/);
    // The same history through the built-in pruning of this window (another token counter) is sent whole.
    const builtIn = threeCalls();
    await new Agent({ model: builtIn, tools: [add], maxContextTokens: 300 }).run("the task");
    expect(builtIn.requests.at(-1)?.messages).toHaveLength(7);
  });

  it("uses any ContextManager through fit and truncateToolResult", async () => {
    const model = threeCalls();
    const result = await new Agent({
      model,
      tools: [add],
      context: {
        budget: 1_000,
        maxToolResultTokens: 10,
        fit: async (history) => history.slice(-1),
        truncateToolResult: (content) => content.slice(0, 10),
      },
    }).run("the task");
    expect(model.requests.map((r) => r.messages.length)).toEqual([1, 1, 1, 1]);
    expect(result.messages[2]).toMatchObject({ role: "tool", content: "1111111111" });
  });

  it("refuses the built-in pruning's options alongside it, and a context that is neither", () => {
    const model = scriptedModel([]);
    expect(() => new Agent({ model, context: (h) => h, maxContextTokens: 1000 })).toThrow(
      new AgentloopError(
        "invalid_option",
        "maxContextTokens goes with the built-in pruning, which context replaces: pass it to contextManager({ ... }) and that as context, or drop one of the two.",
      ),
    );
    expect(() => new Agent({ model, context: {} as never })).toThrow(/^context must be a function/);
  });
});

describe("AgentOptions.onEvent", () => {
  const warnings: Error[] = [];
  const listen = (warning: Error) => warnings.push(warning);
  afterEach(() => {
    process.off("warning", listen);
    warnings.length = 0;
  });

  it("must not throw: an exception there is reported once per run, redacted, and the run goes on", async () => {
    process.on("warning", listen);
    const seen: string[] = [];
    const model = scriptedModel([{ toolCalls: [{ name: "add", arguments: { a: 1, b: 2 } }] }, { text: "3" }]);
    const agent = new Agent({
      model,
      tools: [add],
      secrets: ["sk-hook-secret"],
      onEvent: (event) => {
        seen.push(event.type);
        throw new Error("the listener broke, with sk-hook-secret in hand");
      },
    });
    const result = await agent.run("1 + 2?");
    expect(result).toMatchObject({ stopReason: "final_answer", output: "3" });
    expect(seen.at(-1)).toBe("turn_complete");
    expect(seen.length).toBeGreaterThan(5);
    // Warnings are emitted on the next tick.
    await new Promise((resolve) => setImmediate(resolve));
    expect(warnings.map(({ name, message }) => ({ name, message }))).toEqual([
      {
        name: "AgentloopWarning",
        message: `onEvent threw on the iteration_start event of run ${result.runId}: the listener broke, with [REDACTED] in hand; the run went on (onEvent must not throw, so this is reported once per run).`,
      },
    ]);
  });

  it("throwing does not break a streamed run either: every event is still yielded", async () => {
    process.on("warning", listen);
    const model = scriptedModel([{ text: "hi" }]);
    const agent = new Agent({
      model,
      onEvent: () => {
        throw new Error("no");
      },
    });
    const run = agent.stream("hello");
    const types: string[] = [];
    for await (const event of run) types.push(event.type);
    expect(types).toEqual(["iteration_start", "message_delta", "message", "turn_complete"]);
    expect((await run.result).stopReason).toBe("final_answer");
  });
});
