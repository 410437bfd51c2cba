// Recordings kept as a regression suite, as the README tells users to keep theirs: each file of
// test/recordings/ (made with `agentloop run --record` against the project's fake OpenAI server)
// replays offline, and what matters of the run is checked.
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { Agent } from "../src/index.js";
import { replayModel, replayTools } from "../src/testing/index.js";

const recording = (name: string) => fileURLToPath(new URL(`./recordings/${name}`, import.meta.url));

describe("recorded runs replay as tests", () => {
  it("calculator.jsonl: one calculator call, then the answer", async () => {
    const file = recording("calculator.jsonl");
    const agent = new Agent({ model: replayModel(file), tools: replayTools(file) });
    const result = await agent.run("What is 6*7?");
    expect(result.stopReason).toBe("final_answer");
    expect(result.text).toBe("It is 42.");
    const calls = result.messages.flatMap((m) => (m.role === "assistant" ? (m.toolCalls ?? []) : []));
    expect(calls.map((c) => [c.name, JSON.parse(c.arguments)])).toEqual([
      ["calculator", { expression: "6*7" }],
    ]);
  });
});
