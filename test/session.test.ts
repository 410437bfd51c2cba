import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { Agent, defineTool, Session } from "../src/index.js";
import { memoryStore, type SessionStore, sqliteStore } from "../src/store/index.js";
import { scriptedModel } from "../src/testing/index.js";

/** `fast` answers at once; `slow` waits until the test releases it (or forever). */
function tools() {
  const ran: string[] = [];
  let release: () => void = () => {};
  const gate = new Promise<void>((resolve) => {
    release = resolve;
  });
  const fast = defineTool({
    name: "fast",
    description: "Answers at once.",
    parameters: z.object({}),
    execute: () => {
      ran.push("fast");
      return "fast result";
    },
  });
  const slow = defineTool({
    name: "slow",
    description: "Answers late.",
    parameters: z.object({}),
    execute: async () => {
      ran.push("slow");
      await gate;
      return "slow result";
    },
  });
  return { ran, release: () => release(), list: [slow, fast] };
}

const bothCalls = {
  toolCalls: [
    { id: "s1", name: "slow", arguments: {} },
    { id: "f1", name: "fast", arguments: {} },
  ],
};

const stores: [string, () => Promise<SessionStore>][] = [
  ["memory", async () => memoryStore()],
  ["SQLite", () => sqliteStore(join(mkdtempSync(join(tmpdir(), "agentloop-session-")), "a.db"))],
];

describe.each(stores)("a session on the %s store", (_name, open) => {
  it("stores results as they complete and gives them back in call order, with the run", async () => {
    const store = await open();
    const { release, list } = tools();
    const session = await Session.open(store, "s");
    const agent = new Agent({ model: scriptedModel([bothCalls, { text: "Both done." }]), tools: list });
    const run = agent.stream("go", {
      history: session.messages,
      sessionId: session.id,
      checkpoint: session.checkpoint,
    });
    for await (const event of run) if (event.type === "tool_result" && event.name === "fast") release();
    expect((await run.result).sessionId).toBe("s");
    await session.release();

    const log = (await store.read("s"))?.messages.map((m) => (m.role === "tool" ? m.toolCallId : m.role));
    expect(log).toEqual(["user", "assistant", "f1", "s1", "assistant"]); // completion order
    const again = await Session.open(store, "s");
    expect(again.messages.map((m) => (m.role === "tool" ? m.toolCallId : m.role))).toEqual([
      "user",
      "assistant",
      "s1",
      "f1",
      "assistant",
    ]);
    expect(again.lastRun).toMatchObject({ status: "completed", stopReason: "final_answer", iteration: 2 });
    await again.release();
    await store.close();
  });

  it("continues a run its process left mid-iteration: the finished call is not run again, the model not asked again", async () => {
    const store = await open();
    const first = tools(); // `slow` never finishes: the process "dies" with it in flight
    const session = await Session.open(store, "crash");
    const agent = new Agent({ model: scriptedModel([bothCalls]), tools: first.list });
    const run = agent.stream("go", { history: session.messages, checkpoint: session.checkpoint });
    // Pulled by hand and then dropped, as a killed process would: no abort, no last checkpoint.
    for (
      let next = await run.next();
      !next.done && next.value.type !== "tool_result";
      next = await run.next()
    );
    await session.release();

    const later = await Session.open(store, "crash");
    expect(later.lastRun?.status).toBe("running");
    const second = tools();
    second.release();
    const model = scriptedModel([{ text: "Recovered." }]);
    const resumed = await new Agent({ model, tools: second.list }).resume(
      later.lastRun as NonNullable<typeof later.lastRun>,
      { checkpoint: later.checkpoint },
    ).result;
    expect(resumed).toMatchObject({ stopReason: "final_answer", output: "Recovered." });
    expect(second.ran).toEqual(["slow"]);
    expect(model.requests).toHaveLength(1);
    await later.release();
    const stored = await store.read("crash");
    expect(stored?.summary.status).toBe("completed");
    expect(stored?.messages.filter((m) => m.role === "tool").map((m) => m.toolCallId)).toEqual(["f1", "s1"]);
    await store.close();
  });
});
