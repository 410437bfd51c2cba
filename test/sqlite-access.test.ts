// Who may reach a SQLite store's sessions: the modes of the files and folder it creates, a holder
// on another host (which this machine cannot check) taken over only when forced, and a file
// opened to be read only.
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { afterAll, describe, expect, it } from "vitest";
import { StoreError, sqliteStore } from "../src/store/index.js";

const root = mkdtempSync(join(tmpdir(), "agentloop-sqlite-access-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let dirs = 0;
const freshDir = () => mkdtempSync(join(root, `${++dirs}-`));
const mode = (path: string) => statSync(path).mode & 0o777;
const user = (content: string) => ({ role: "user" as const, content });

async function rejection(promise: Promise<unknown>): Promise<StoreError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(StoreError);
  expect((error as StoreError).message).not.toContain("\n");
  return error as StoreError;
}

/** Marks session `id` of `file` as held by a process on another host. */
function heldElsewhere(file: string, id: string): void {
  const db = new DatabaseSync(file);
  db.prepare("UPDATE sessions SET holder = ? WHERE id = ?").run(
    JSON.stringify({ pid: 4242, host: "build-7.elsewhere", token: "theirs" }),
    id,
  );
  db.close();
}

describe.skipIf(process.platform === "win32")("the modes of what the SQLite store creates", () => {
  it("a new file is 0600 (its -wal and -shm too) in folders made 0700", async () => {
    const dir = freshDir();
    const file = join(dir, "made", "deeper", "agentloop.db");
    const store = await sqliteStore(file);
    try {
      const handle = await store.acquire("s");
      await handle.checkpoint({ messages: [user("private")] });
      for (const path of [file, `${file}-wal`, `${file}-shm`]) {
        expect(existsSync(path), path).toBe(true);
        expect(mode(path).toString(8), path).toBe("600");
      }
      expect(mode(join(dir, "made")).toString(8)).toBe("700");
      expect(mode(join(dir, "made", "deeper")).toString(8)).toBe("700");
      await handle.release();
    } finally {
      await store.close();
    }
  });

  it("an existing folder and an existing file keep their modes", async () => {
    const dir = freshDir();
    const folder = join(dir, "shared");
    mkdirSync(folder);
    chmodSync(folder, 0o755);
    const file = join(folder, "team.db");
    writeFileSync(file, "");
    chmodSync(file, 0o644);
    const store = await sqliteStore(file);
    await (await store.acquire("s")).release();
    await store.close();
    expect(mode(folder).toString(8)).toBe("755");
    expect(mode(file).toString(8)).toBe("644");
  });
});

describe("a session held by a process on another host", () => {
  it("is refused naming the holder; force takes it over (or removes it), telling who held it", async () => {
    const file = join(freshDir(), "agentloop.db");
    const store = await sqliteStore(file);
    try {
      const handle = await store.acquire("away");
      await handle.checkpoint({ messages: [user("one")] });
      await handle.release();
      heldElsewhere(file, "away");
      const refused = await rejection(store.acquire("away"));
      expect(refused.code).toBe("session_busy");
      expect(refused.holder).toBe("process 4242 on build-7.elsewhere");
      expect((await rejection(store.remove("away"))).code).toBe("session_busy");
      const told: string[] = [];
      const taken = await store.acquire("away", { force: true, onTakeOver: (h) => told.push(h) });
      expect(told).toEqual(["process 4242 on build-7.elsewhere"]);
      expect(taken.session.messages).toEqual([user("one")]);
      await taken.release();
      heldElsewhere(file, "away");
      expect(await store.remove("away", { force: true, onTakeOver: (h) => told.push(h) })).toBe(true);
      expect(told).toHaveLength(2);
    } finally {
      await store.close();
    }
  });
});

describe("readOnly", () => {
  it("reads sessions, refuses every write with store_unwritable, and changes nothing", async () => {
    const file = join(freshDir(), "agentloop.db");
    const writer = await sqliteStore(file);
    const handle = await writer.acquire("kept");
    await handle.checkpoint({ messages: [user("kept")] });
    await handle.release();
    await writer.close();
    const before = statSync(file).mtimeMs;

    const reader = await sqliteStore(file, { readOnly: true });
    try {
      expect((await reader.list()).map((s) => s.id)).toEqual(["kept"]);
      expect((await reader.read("kept"))?.messages).toEqual([user("kept")]);
      expect((await rejection(reader.acquire("new"))).code).toBe("store_unwritable");
      expect((await rejection(reader.remove("kept"))).code).toBe("store_unwritable");
    } finally {
      await reader.close();
    }
    expect(statSync(file).mtimeMs).toBe(before);
  });

  it("a file whose schema needs an upgrade is one line saying so; a missing file is not created", async () => {
    const dir = freshDir();
    const old = join(dir, "old.db");
    const db = new DatabaseSync(old);
    db.exec("PRAGMA application_id = 1097288816"); // agentloop's, at schema version 0
    db.close();
    const error = await rejection(sqliteStore(old, { readOnly: true }));
    expect(error.code).toBe("store_unwritable");
    expect(error.message).toMatch(/old\.db needs an upgrade to this agentloop's schema \(0 to \d+\)/);
    await rejection(sqliteStore(join(dir, "missing.db"), { readOnly: true }));
    expect(existsSync(join(dir, "missing.db"))).toBe(false);
  });
});
