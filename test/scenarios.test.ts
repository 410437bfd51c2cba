import { describe, expect, it } from "vitest";
import { Agent } from "../src/index.js";
import { scriptedModel } from "../src/testing/index.js";
import { builtinTools } from "../src/tools/builtin/index.js";

/** The three scenarios every agent must pass, through the library with the real built-in tools. */
describe("scenarios with the scripted model", () => {
  it("answers without a tool in one model call", async () => {
    const model = scriptedModel([{ text: "Hello! How can I help?" }]);
    const result = await new Agent({ model, tools: builtinTools() }).run("Hi there");
    expect(result).toMatchObject({
      stopReason: "final_answer",
      iterations: 1,
      output: "Hello! How can I help?",
    });
    expect(model.remaining).toBe(0);
  });

  it("computes 157.09 * 493.89 with the calculator", async () => {
    const model = scriptedModel([
      { toolCalls: [{ name: "calculator", arguments: { expression: "157.09 * 493.89" } }] },
      { text: "157.09 * 493.89 = 77585.1801" },
    ]);
    const result = await new Agent({ model, tools: builtinTools() }).run("What is 157.09 * 493.89?");
    expect(result.stopReason).toBe("final_answer");
    expect(result.messages[2]).toMatchObject({
      role: "tool",
      name: "calculator",
      content: "77585.1801",
      isError: false,
    });
    expect(model.requests[1]?.messages.at(-1)).toMatchObject({ content: "77585.1801" });
  });

  it("solves a several-step problem", async () => {
    const model = scriptedModel([
      {
        text: "My mother is 20 + 30.",
        toolCalls: [{ name: "calculator", arguments: { expression: "20 + 30" } }],
      },
      {
        text: "My brother is 50 - 32.",
        toolCalls: [{ name: "calculator", arguments: { expression: "50 - 32" } }],
      },
      { text: "Your brother is 18." },
    ]);
    const prompt =
      "My brother is 32 years younger than my mother, my mother is 30 years older than me, I am 20. How old is my brother?";
    const result = await new Agent({ model, tools: builtinTools() }).run(prompt);
    expect(result).toMatchObject({
      stopReason: "final_answer",
      iterations: 3,
      output: "Your brother is 18.",
    });
    const results = result.messages.filter((m) => m.role === "tool").map((m) => m.content);
    expect(results).toEqual(["50", "18"]);
  });
});
