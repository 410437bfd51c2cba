// The first run that needs nothing: `agentloop demo`, and examples/first-agent.ts, the same with
// the library. No key, no network (the CLI runs with PATH alone in its environment).
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { runCli } from "./helpers.js";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const ANSWERS = [
  "The capital of France is Paris.",
  "157.09 * 493.89 = 77585.1801",
  "Your brother is 67. He was 3 when you were 6, so he is 3 years younger, and the gap never changes (not 70 / 2 = 35).",
];

describe("agentloop demo", () => {
  it("answers the three questions with the real calculator: answers on stdout, questions and progress on stderr, exit 0", async () => {
    const { code, stdout, stderr } = await runCli(["demo"]);
    expect(stdout).toBe(ANSWERS.map((a) => `${a}\n`).join(""));
    expect(code).toBe(0);
    // run's progress lines, durations aside (they are real).
    const progress = stderr.replace(/\(\d+ ms\)/g, "(N ms)");
    expect(progress).toContain("no API key, no network");
    expect(progress).toContain(
      [
        "> When I was 6, my brother was half my age. Now I am 70. How old is my brother?",
        "· iteration 1",
        '  → calculator {"expression":"6 / 2"}',
        "  ✓ calculator (N ms) 3",
        "· iteration 2",
        '  → calculator {"expression":"6 - 3"}',
        "  ✓ calculator (N ms) 3",
        "· iteration 3",
        '  → calculator {"expression":"70 - 3"}',
        "  ✓ calculator (N ms) 67",
        "· iteration 4",
      ].join("\n"),
    );
    expect(progress).toContain("> What is the capital of France?\n· iteration 1\n\n");
    expect(progress).toContain('npx agentloop-runtime run "What is 157.09 * 493.89?"');
    // A local server needs a model of its own: the hint runs as written there too.
    expect(progress).toContain("--base-url http://localhost:11434/v1 --model llama3.1");
  });

  it("--json prints each run's events, the thinking included, and nothing on stderr", async () => {
    const { code, stdout, stderr } = await runCli(["demo", "--json"]);
    const events = stdout
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as { type: string; [key: string]: unknown });
    const ends = events.filter((e) => e.type === "turn_complete");
    expect(ends.map((e) => [e.stopReason, e.output, e.iterations])).toEqual([
      ["final_answer", ANSWERS[0], 1],
      ["final_answer", ANSWERS[1], 2],
      ["final_answer", ANSWERS[2], 4],
    ]);
    const thinking = events.filter((e) => e.type === "thinking").map((e) => e.text);
    expect(thinking.join("")).toContain("This is general knowledge; no tool is needed.");
    expect(events.filter((e) => e.type === "tool_result").map((e) => e.content)).toEqual([
      "77585.1801",
      "3",
      "3",
      "67",
    ]);
    expect(stderr).toBe("");
    expect(code).toBe(0);
  });
});

describe("examples/first-agent.ts", () => {
  it("runs in the checkout without a key: the demo model, the real tools, the events as they come", () => {
    const run = spawnSync(process.execPath, ["examples/first-agent.ts"], {
      cwd: ROOT,
      encoding: "utf8",
      env: { PATH: process.env.PATH ?? "" },
    });
    expect(run.stderr).toBe("");
    expect(run.stdout).toContain(
      '> What is 157.09 * 493.89?\n  calculator {"expression":"157.09 * 493.89"}\n  = 77585.1801\n157.09 * 493.89 = 77585.1801 (final_answer)\n',
    );
    for (const answer of ANSWERS) expect(run.stdout).toContain(`${answer} (final_answer)\n`);
    expect(run.status).toBe(0);
  });
});
