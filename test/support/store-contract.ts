/**
 * What every `SessionStore` does (src/store/types.ts, SPEC section 9), as one set of tests that
 * each store's test file runs against a fresh, empty store:
 *
 *   storeContract("SQLite", () => sqliteStore(tempFile()));
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { Message } from "../../src/core/messages.js";
import {
  type Json,
  type RunRecordInput,
  type SessionStore,
  StoreError,
  type StoreErrorCode,
} from "../../src/store/index.js";

/** Every shape a `Message` takes, with text that JSON and SQL must carry unchanged. */
const EVERY_MESSAGE: Message[] = [
  { role: "user", content: "List the files, then read 'notes.md'.\nThanks! \"quoted\" \\ back\\slash" },
  { role: "assistant", content: "", toolCalls: [{ id: "call_1", name: "list_files", arguments: "{}" }] },
  {
    role: "assistant",
    content: "Reading both.",
    thinking: "The user wants two files; read them in parallel.",
    thinkingSignature: "EqQBCkYIARgCKkC+sig/=",
    toolCalls: [
      { id: "call_2", name: "read_file", arguments: '{"path":"notes.md"}' },
      {
        id: "call_3",
        name: "read_file",
        arguments: "{not json",
        invalid: "the arguments are not valid JSON",
      },
    ],
  },
  {
    role: "tool",
    toolCallId: "call_2",
    name: "read_file",
    content: "# Notes\n\n- 日本語 ✓ 🚀 \u0000 \ud800",
    isError: false,
  },
  {
    role: "tool",
    toolCallId: "call_3",
    name: "read_file",
    content: "Error: invalid arguments",
    isError: true,
  },
  { role: "assistant", content: "Done: notes.md has one heading." },
];

const user = (content: string): Message => ({ role: "user", content });

async function rejection(promise: Promise<unknown>): Promise<StoreError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(StoreError);
  const storeError = error as StoreError;
  expect(storeError.message).not.toContain("\n");
  return storeError;
}

async function rejectsWith(promise: Promise<unknown>, code: StoreErrorCode): Promise<StoreError> {
  const error = await rejection(promise);
  expect(error.code).toBe(code);
  return error;
}

export function storeContract(name: string, makeStore: () => Promise<SessionStore> | SessionStore): void {
  describe(`${name} session store (contract)`, () => {
    let store: SessionStore;
    beforeEach(async () => {
      store = await makeStore();
    });
    afterEach(async () => {
      await store.close();
    });

    it("creates a session on its first acquire", async () => {
      expect(await store.read("s1")).toBeUndefined();
      const handle = await store.acquire("s1");
      expect(handle.sessionId).toBe("s1");
      expect(handle.session.messages).toEqual([]);
      expect(handle.session.lastRun).toBeUndefined();
      expect(handle.session.summary).toMatchObject({ id: "s1", messageCount: 0, status: "new" });
      const stored = await store.read("s1");
      expect(stored?.summary).toMatchObject({ id: "s1", messageCount: 0, status: "running" });
      expect(stored?.summary.createdAt).toBe(handle.session.summary.createdAt);
      await handle.release();
      expect((await store.read("s1"))?.summary.status).toBe("new");
      expect((await store.list()).map((s) => s.id)).toEqual(["s1"]);
    });

    it("stores every message shape exactly as given", async () => {
      const handle = await store.acquire("shapes");
      await handle.checkpoint({ messages: EVERY_MESSAGE });
      expect((await store.read("shapes"))?.messages).toStrictEqual(EVERY_MESSAGE);
      await handle.release();
      const again = await store.acquire("shapes");
      expect(again.session.messages).toStrictEqual(EVERY_MESSAGE);
      expect(again.session.summary.messageCount).toBe(EVERY_MESSAGE.length);
      await again.release();
    });

    it("keeps its own copies: changing what was written or read changes nothing stored", async () => {
      const handle = await store.acquire("copies");
      const message = { role: "user", content: "original" } as Message;
      await handle.checkpoint({
        messages: [message],
        run: { runId: "r", status: "running", state: { n: 1 } },
      });
      message.content = "changed";
      const read = await store.read("copies");
      (read?.messages[0] as Message).content = "changed too";
      (read?.lastRun?.state as { n: number }).n = 2;
      const again = await store.read("copies");
      expect(again?.messages).toEqual([user("original")]);
      expect(again?.lastRun?.state).toEqual({ n: 1 });
      await handle.release();
    });

    it("appends in order across checkpoints", async () => {
      const handle = await store.acquire("order");
      await handle.checkpoint({ messages: [user("1")] });
      await handle.checkpoint({ messages: [user("2"), user("3"), user("4")] });
      await handle.checkpoint({ run: { runId: "r", status: "running", state: null } });
      await handle.checkpoint({ messages: [] });
      await handle.checkpoint({});
      await handle.checkpoint({ messages: [user("5")] });
      const stored = await store.read("order");
      expect(stored?.messages.map((m) => m.content)).toEqual(["1", "2", "3", "4", "5"]);
      expect(stored?.summary.messageCount).toBe(5);
      await handle.release();
    });

    it("upserts run records; the last one written is the session's lastRun", async () => {
      const handle = await store.acquire("runs");
      await handle.checkpoint({ run: { runId: "run-1", status: "running", state: { iteration: 1 } } });
      const first = (await store.read("runs"))?.lastRun;
      expect(first).toMatchObject({
        runId: "run-1",
        sessionId: "runs",
        status: "running",
        state: { iteration: 1 },
      });
      expect(first?.stopReason).toBeUndefined();

      const state: Json = {
        iteration: 2,
        pending: [{ id: "call_1", args: { deep: [1, "two", null, true] } }],
      };
      await handle.checkpoint({
        run: { runId: "run-1", status: "waiting", stopReason: "approval_required", state },
      });
      const waiting = (await store.read("runs"))?.lastRun;
      expect(waiting).toMatchObject({
        runId: "run-1",
        status: "waiting",
        stopReason: "approval_required",
        state,
      });
      expect(waiting?.createdAt).toBe(first?.createdAt);
      expect(waiting?.updatedAt).toBeGreaterThanOrEqual(first?.updatedAt ?? 0);

      await handle.checkpoint({ run: { runId: "run-1", status: "running", state: { iteration: 3 } } });
      expect((await store.read("runs"))?.lastRun?.stopReason).toBeUndefined();
      await handle.checkpoint({
        messages: [user("next")],
        run: { runId: "run-2", status: "completed", stopReason: "final_answer", state: {} },
      });
      await handle.release();

      const stored = await store.read("runs");
      expect(stored?.lastRun).toMatchObject({
        runId: "run-2",
        status: "completed",
        stopReason: "final_answer",
      });
      expect(stored?.summary).toMatchObject({
        status: "completed",
        stopReason: "final_answer",
        lastRunId: "run-2",
      });
      expect(await store.sessionOfRun("run-1")).toBe("runs");
      expect(await store.sessionOfRun("run-2")).toBe("runs");
      expect(await store.sessionOfRun("run-3")).toBeUndefined();
    });

    it("a checkpoint that fails writes nothing, and what was stored before stays as it was", async () => {
      const other = await store.acquire("other");
      await other.checkpoint({
        run: { runId: "theirs", status: "waiting", stopReason: "ask_question", state: 1 },
      });
      await other.release();
      const handle = await store.acquire("atomic");
      await handle.checkpoint({
        messages: [user("kept")],
        run: { runId: "mine", status: "running", state: { n: 1 } },
      });
      const before = await store.read("atomic");

      const bigint = { n: 1n } as unknown as Json;
      const fails: Parameters<typeof handle.checkpoint>[0][] = [
        // State that JSON cannot hold.
        { messages: [user("lost 1")], run: { runId: "mine", status: "completed", state: bigint } },
        // A message that JSON cannot hold, after one that it can.
        { messages: [user("lost 2"), { role: "user", content: bigint } as unknown as Message] },
        // A run id of another session: found only inside the transaction, after the messages.
        { messages: [user("lost 3")], run: { runId: "theirs", status: "completed", state: {} } },
      ];
      for (const checkpoint of fails) {
        const error = await rejectsWith(handle.checkpoint(checkpoint), "store_error");
        expect(error.message.length).toBeGreaterThan(10);
        expect(await store.read("atomic")).toEqual(before);
      }
      expect((await store.read("other"))?.lastRun).toMatchObject({
        runId: "theirs",
        status: "waiting",
        state: 1,
      });
      expect(await store.sessionOfRun("theirs")).toBe("other");

      await handle.checkpoint({ messages: [user("after")] });
      expect((await store.read("atomic"))?.messages).toEqual([user("kept"), user("after")]);
      await handle.release();
    });

    it("a held session cannot be acquired again until it is released", async () => {
      const handle = await store.acquire("busy");
      await handle.checkpoint({ messages: [user("one")] });
      const error = await rejectsWith(store.acquire("busy"), "session_busy");
      expect(error.message).toContain("session 'busy'");
      await handle.release();
      await handle.release(); // idempotent
      await rejectsWith(handle.checkpoint({ messages: [user("late")] }), "closed");
      const again = await store.acquire("busy");
      expect(again.session.messages).toEqual([user("one")]);
      await again.checkpoint({ messages: [user("two")] });
      expect((await store.read("busy"))?.messages).toEqual([user("one"), user("two")]);
      await again.release();
    });

    it("force takes a held session over (or removes it), telling who held it; the old handle writes nothing", async () => {
      const handle = await store.acquire("forced");
      await handle.checkpoint({ messages: [user("one")] });
      const told: string[] = [];
      const taken = await store.acquire("forced", { force: true, onTakeOver: (holder) => told.push(holder) });
      expect(told).toHaveLength(1);
      expect(taken.session.messages).toEqual([user("one")]);
      await rejection(handle.checkpoint({ messages: [user("late")] }));
      await handle.release(); // leaves the new holder's hold alone
      await rejectsWith(store.acquire("forced"), "session_busy");
      expect(await store.remove("forced", { force: true, onTakeOver: (holder) => told.push(holder) })).toBe(
        true,
      );
      expect(told).toHaveLength(2);
      expect(await store.read("forced")).toBeUndefined();
      await taken.release();
    });

    it("acquiring a session whose run was left running reports it as interrupted", async () => {
      const handle = await store.acquire("crashed");
      await handle.checkpoint({
        messages: [user("go")],
        run: { runId: "r", status: "running", state: { i: 4 } },
      });
      await handle.release();
      expect((await store.list())[0]).toMatchObject({ id: "crashed", status: "interrupted", lastRunId: "r" });
      const resumed = await store.acquire("crashed");
      expect(resumed.session.summary.status).toBe("interrupted");
      expect(resumed.session.lastRun).toMatchObject({ runId: "r", status: "running", state: { i: 4 } });
      await resumed.release();
    });

    it("removes a session and its runs, but not while it is held", async () => {
      const handle = await store.acquire("gone");
      await handle.checkpoint({
        messages: [user("x")],
        run: { runId: "gone-run", status: "completed", state: {} },
      });
      await rejectsWith(store.remove("gone"), "session_busy");
      expect((await store.read("gone"))?.messages).toEqual([user("x")]);
      await handle.release();
      expect(await store.remove("gone")).toBe(true);
      expect(await store.read("gone")).toBeUndefined();
      expect(await store.sessionOfRun("gone-run")).toBeUndefined();
      expect(await store.list()).toEqual([]);
      expect(await store.remove("gone")).toBe(false);
      const fresh = await store.acquire("gone");
      expect(fresh.session.messages).toEqual([]);
      expect(fresh.session.lastRun).toBeUndefined();
      await fresh.release();
    });

    it("lists sessions most recently updated first, with their statuses", async () => {
      const write = async (id: string, run?: RunRecordInput) => {
        const handle = await store.acquire(id);
        if (run) await handle.checkpoint({ messages: [user(id)], run });
        return handle;
      };
      await (await write("new")).release();
      await (
        await write("done", { runId: "r-done", status: "completed", stopReason: "final_answer", state: {} })
      ).release();
      await (
        await write("asking", { runId: "r-ask", status: "waiting", stopReason: "ask_question", state: {} })
      ).release();
      await (await write("crashed", { runId: "r-crash", status: "running", state: {} })).release();
      const live = await write("live", { runId: "r-live", status: "running", state: {} });
      const done = await store.acquire("done");
      await done.checkpoint({ messages: [user("again")] });
      await done.release();

      const list = await store.list();
      expect(list.map((s) => [s.id, s.status, s.stopReason, s.messageCount])).toEqual([
        ["done", "completed", "final_answer", 2],
        ["live", "running", undefined, 1],
        ["crashed", "interrupted", undefined, 1],
        ["asking", "waiting", "ask_question", 1],
        ["new", "new", undefined, 0],
      ]);
      expect(list[0]?.lastRunId).toBe("r-done");
      for (let i = 1; i < list.length; i++)
        expect(list[i - 1]?.updatedAt).toBeGreaterThanOrEqual(list[i]?.updatedAt ?? 0);
      expect((await store.list({ status: "interrupted" })).map((s) => s.id)).toEqual(["crashed"]);
      expect((await store.list({ status: "waiting", limit: 5 })).map((s) => s.id)).toEqual(["asking"]);
      expect((await store.list({ limit: 2 })).map((s) => s.id)).toEqual(["done", "live"]);
      await live.release();
      expect((await store.list())[1]).toMatchObject({ id: "live", status: "interrupted" });
      expect((await store.list({ status: "interrupted", limit: 1 })).map((s) => s.id)).toEqual(["live"]);
      // Oldest first: what waited longest comes first (orphans to resume, so none starves).
      expect(
        (await store.list({ status: "interrupted", limit: 1, oldestFirst: true })).map((s) => s.id),
      ).toEqual(["crashed"]);
      expect((await store.list({ oldestFirst: true })).map((s) => s.id)).toEqual([
        "new",
        "asking",
        "crashed",
        "live",
        "done",
      ]);
      await store.ping();
      await store.close();
      await rejectsWith(store.ping(), "closed");
    });

    it("refuses session ids outside [A-Za-z0-9._-]{1,128}, naming the rule", async () => {
      for (const bad of ["", "a/b", "../etc", "a b", "x".repeat(129), "é", "new\nline", "semi;colon"]) {
        for (const call of [store.acquire(bad), store.read(bad), store.remove(bad)]) {
          const error = await rejectsWith(call, "invalid_session_id");
          expect(error.message).toContain("A-Z a-z 0-9 . _ -");
        }
      }
      for (const good of ["x".repeat(128), "A-z_0.9", "..", "-"]) {
        const handle = await store.acquire(good);
        await handle.release();
      }
      expect(await store.list()).toHaveLength(4);
    });

    it("rejects with `closed` after close, which releases what was held", async () => {
      const handle = await store.acquire("open");
      await store.close();
      await store.close(); // idempotent
      await rejectsWith(handle.checkpoint({ messages: [user("late")] }), "closed");
      await handle.release();
      await rejectsWith(store.acquire("open"), "closed");
      await rejectsWith(store.read("open"), "closed");
      await rejectsWith(store.list(), "closed");
      await rejectsWith(store.sessionOfRun("r"), "closed");
      await rejectsWith(store.remove("open"), "closed");
    });
  });
}
