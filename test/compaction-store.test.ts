// A compaction's checkpoint in each store (SPEC section 13): the log keeps every message and the
// summary after them, and a session opened again goes on from the compacted history.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { Agent, defineTool, type Message, Session } from "../src/index.js";
import { memoryStore, postgresStore, type SessionStore, sqliteStore } from "../src/store/index.js";
import { scriptedModel } from "../src/testing/index.js";
import { type Postgres, skipReason, startPostgres } from "./support/postgres.js";

const dir = mkdtempSync(join(tmpdir(), "agentloop-compaction-store-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const lookup = defineTool({
  name: "lookup",
  description: "Looks a key up.",
  parameters: z.object({ key: z.number() }),
  execute: ({ key }) => `value ${key}: ${"lorem ipsum dolor sit amet ".repeat(30)}`,
});

function agent() {
  let calls = 0;
  const model = scriptedModel((request) => {
    if (request.system.startsWith("You compact")) return { text: "SUMMARY of the lookups" };
    calls++;
    return calls <= 10 ? { toolCalls: [{ name: "lookup", arguments: { key: calls } }] } : { text: "done" };
  });
  return new Agent({
    model,
    tools: [lookup],
    maxIterations: 20,
    maxContextTokens: 4000,
    compaction: { at: 0.5 },
  });
}

const summaries = (messages: readonly Message[]) => messages.filter((m) => m.role === "user" && m.compaction);

function compactionInStore(name: string, open: () => Promise<SessionStore>) {
  it(`${name}: stores the summary as a checkpoint and goes on from the compacted history`, async () => {
    const store = await open();
    try {
      let session = await Session.open(store, "s");
      const result = await agent().run("Look the keys up.", {
        checkpoint: session.checkpoint,
        sessionId: "s",
      });
      expect(result.stopReason).toBe("final_answer");
      expect(summaries(result.messages).length).toBeGreaterThan(0);
      await session.release();

      const stored = await store.read("s");
      const log = stored?.messages ?? [];
      // Every message ever appended stays in the log (1 input, 10 calls with results, 1 answer), summaries too.
      expect(log.length).toBe(1 + 20 + 1 + summaries(result.messages).length);
      expect(summaries(log)).toEqual(summaries(result.messages));
      session = await Session.open(store, "s");
      expect(session.messages).toEqual(result.messages);
      expect(session.lastRun?.stopReason).toBe("final_answer");

      // The next run follows the compacted history, and its messages are appended after the summary.
      const next = await new Agent({ model: scriptedModel([{ text: "again" }]) }).run("And now?", {
        history: session.messages,
        checkpoint: session.checkpoint,
        sessionId: "s",
      });
      await session.release();
      session = await Session.open(store, "s");
      expect(session.messages).toEqual(next.messages);
      expect(session.messages.slice(-2)).toEqual([
        { role: "user", content: "And now?" },
        { role: "assistant", content: "again" },
      ]);
      await session.release();
    } finally {
      await store.close();
    }
  });
}

describe("compaction in the session stores", () => {
  compactionInStore("in-memory", async () => memoryStore());
  compactionInStore("SQLite", async () => sqliteStore(join(dir, "agentloop.db")));
});

describe.skipIf(skipReason !== undefined)(
  `compaction in PostgreSQL ${skipReason ? `(skipped: ${skipReason})` : ""}`,
  () => {
    let pg: Postgres;
    beforeAll(async () => {
      pg = await startPostgres();
    }, 60_000);
    afterAll(() => pg?.stop());
    compactionInStore("PostgreSQL", async () => postgresStore(await pg.database()));
  },
);
