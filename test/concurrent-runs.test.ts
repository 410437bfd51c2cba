// Many runs of one agent at once: what they share, what each holds, and how one that fails ends.
import { setImmediate as tick } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { Agent, defineTool } from "../src/index.js";
import { scriptedModel } from "../src/testing/scripted-model.js";

const add = defineTool({
  name: "add",
  description: "Adds two numbers.",
  parameters: z.object({ a: z.number(), b: z.number() }),
  execute: ({ a, b }) => a + b,
});

describe("runs of one agent", () => {
  it("share one tool list: every request of every run carries the same tool specs", async () => {
    const model = scriptedModel((_, i) =>
      i % 2 === 0 ? { toolCalls: [{ name: "add", arguments: { a: 1, b: i } }] } : { text: "done" },
    );
    const agent = new Agent({ model, tools: [add] });
    expect(agent.tools).toBe(agent.tools);
    const results = await Promise.all([agent.run("one"), agent.run("two"), agent.run("three")]);
    expect(results.map((r) => r.stopReason)).toEqual(["final_answer", "final_answer", "final_answer"]);
    expect(model.requests).toHaveLength(6);
    const [first] = model.requests;
    for (const request of model.requests) {
      expect(request.tools).toBe(first?.tools);
      expect(request.tools).toEqual([
        { name: "add", description: "Adds two numbers.", parameters: first?.tools[0]?.parameters },
      ]);
    }
  });

  it("a run whose checkpoint throws rejects its result, and leaves no unhandled rejection behind", async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on("unhandledRejection", onUnhandled);
    try {
      // The first checkpoint (the input) throws: the model is never asked.
      const agent = new Agent({ model: scriptedModel([]) });
      const checkpoint = async () => {
        throw new Error("disk full");
      };
      await expect(agent.run("go", { checkpoint })).rejects.toThrow("disk full");
      // Iterated instead: the iteration sees the error, `result` too when read later.
      const handle = agent.stream("go", { checkpoint });
      await expect(
        (async () => {
          for await (const _event of handle);
        })(),
      ).rejects.toThrow("disk full");
      for (let i = 0; i < 5; i++) await tick();
      await expect(handle.result).rejects.toThrow("disk full");
      for (let i = 0; i < 5; i++) await tick();
      expect(unhandled).toEqual([]);
    } finally {
      process.off("unhandledRejection", onUnhandled);
    }
  });
});
