// The SQLite store beyond the contract (test/store.test.ts): real processes contending for a
// session, a kill at any moment, several processes creating one new file, and files it must
// refuse without changing them. The worker processes run the built store (dist/).
import { type ChildProcess, spawn } from "node:child_process";
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { afterAll, describe, expect, it, onTestFinished } from "vitest";
import { StoreError, type StoreErrorCode, sqliteStore } from "../src/store/index.js";

const WORKER = new URL("./support/store-worker.mjs", import.meta.url).pathname;
const root = mkdtempSync(join(tmpdir(), "agentloop-sqlite-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let dirs = 0;
const freshDir = () => mkdtempSync(join(root, `${++dirs}-`));
const linux = process.platform === "linux";

interface Worker {
  child: ChildProcess;
  /** Resolves with the first line (from the start of output) that satisfies `match`. */
  line(match?: (line: string) => boolean): Promise<string>;
  exited: Promise<number | null>;
}

function worker(args: string[], command = process.execPath, prefix: string[] = []): Worker {
  const child = spawn(command, [...prefix, WORKER, ...args], { stdio: ["ignore", "pipe", "inherit"] });
  onTestFinished(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  });
  const lines: string[] = [];
  const waiters: (() => void)[] = [];
  let buffered = "";
  child.stdout?.setEncoding("utf8").on("data", (chunk: string) => {
    buffered += chunk;
    const parts = buffered.split("\n");
    buffered = parts.pop() ?? "";
    lines.push(...parts);
    for (const wake of waiters.splice(0)) wake();
  });
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  exited.then(() => {
    for (const wake of waiters.splice(0)) wake();
  });
  return {
    child,
    exited,
    async line(match = () => true) {
      for (;;) {
        const found = lines.find(match);
        if (found !== undefined) return found;
        if (child.exitCode !== null || child.signalCode !== null)
          throw new Error(
            `worker ${args.join(" ")} exited without the expected line; it printed: ${lines.join(" | ")}`,
          );
        await new Promise<void>((resolve) => waiters.push(resolve));
      }
    },
  };
}

/** Runs a worker to its end and returns its last line, parsed. */
async function result(args: string[]): Promise<Record<string, unknown>> {
  const w = worker(args);
  await w.exited;
  return JSON.parse(await w.line()) as Record<string, unknown>;
}

async function killed(w: Worker): Promise<void> {
  w.child.kill("SIGKILL");
  await w.exited;
}

async function rejectsWith(promise: Promise<unknown>, code: StoreErrorCode): Promise<StoreError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(StoreError);
  expect((error as StoreError).code).toBe(code);
  expect((error as StoreError).message).not.toContain("\n");
  return error as StoreError;
}

describe("SQLite store across processes", () => {
  it("a second process gets session_busy while the first lives, and the session at once after a SIGKILL", async () => {
    const file = join(freshDir(), "agentloop.db");
    const holder = worker(["hold", file, "shared"]);
    await holder.line((l) => l === "held");

    const busy = await result(["acquire", file, "shared"]);
    expect(busy.code).toBe("session_busy");
    expect(busy.message).toContain(`process ${holder.child.pid}`);
    const here = await sqliteStore(file);
    onTestFinished(() => here.close());
    await rejectsWith(here.acquire("shared"), "session_busy");
    await rejectsWith(here.remove("shared"), "session_busy");
    expect((await here.list())[0]).toMatchObject({ id: "shared", status: "running" });

    await killed(holder);
    expect((await here.list())[0]).toMatchObject({ id: "shared", status: "interrupted" });
    expect(await result(["acquire", file, "shared"])).toEqual({ status: "interrupted", messages: 1 });
    const mine = await here.acquire("shared");
    expect(mine.session.lastRun).toMatchObject({ runId: `run-${holder.child.pid}`, status: "running" });
    await mine.release();
  });

  it("every checkpoint that resolved survives a SIGKILL, none torn or duplicated", async () => {
    const file = join(freshDir(), "agentloop.db");
    const writer = worker(["checkpoints", file, "killed"]);
    const last = Number(await writer.line((l) => Number(l) >= 200));
    await killed(writer);
    const store = await sqliteStore(file);
    onTestFinished(() => store.close());
    const session = await store.read("killed");
    const contents = session?.messages.map((m) => Number(m.content)) ?? [];
    // The writer may have stored a few more after the last line we read before the kill.
    expect(contents.length).toBeGreaterThan(last);
    expect(contents).toEqual(contents.map((_, i) => i));
    expect(session?.lastRun?.state).toEqual({ i: contents.length - 1 });
    expect(session?.summary).toMatchObject({ messageCount: contents.length, status: "interrupted" });
  });

  it("several processes creating one new file at the same moment all succeed (the migration runs once)", async () => {
    for (let round = 0; round < 3; round++) {
      const dir = freshDir();
      const file = join(dir, "new", "folder", "agentloop.db");
      const go = join(dir, "go");
      const openers = [1, 2, 3, 4].map((n) => worker(["open", file, `p${n}`, go]));
      await Promise.all(openers.map((w) => w.line((l) => l === "ready")));
      writeFileSync(go, "");
      for (const w of openers)
        expect(JSON.parse(await w.line((l) => l.startsWith("{")))).toEqual({ ok: true });
      // Closing a store may still hold the file a moment (the last WAL checkpoint): look once all are gone.
      expect(await Promise.all(openers.map((w) => w.exited))).toEqual([0, 0, 0, 0]);
      const store = await sqliteStore(file);
      expect((await store.list()).map((s) => s.id).sort()).toEqual(["p1", "p2", "p3", "p4"]);
      await store.close();
      const db = new DatabaseSync(file);
      expect(db.prepare("PRAGMA user_version").get()).toEqual({ user_version: 1 });
      expect(db.prepare("PRAGMA journal_mode").get()).toEqual({ journal_mode: "wal" });
      db.close();
    }
  });
});

describe("SQLite store: holders", () => {
  /** A store whose session "s" has this holder written into its row, as another process would have. */
  async function heldBy(holder: unknown) {
    const file = join(freshDir(), "agentloop.db");
    const setup = await sqliteStore(file);
    await (await setup.acquire("s")).release();
    await setup.close();
    const db = new DatabaseSync(file);
    db.prepare("UPDATE sessions SET holder = ? WHERE id = 's'").run(
      typeof holder === "string" ? holder : JSON.stringify(holder),
    );
    db.close();
    const store = await sqliteStore(file);
    onTestFinished(() => store.close());
    return store;
  }
  const stat = (pid: number) => readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.split(" ");

  it("a holder on another host counts as alive", async () => {
    const store = await heldBy({ pid: 1, host: `not-${hostname()}`, token: "t" });
    const error = await rejectsWith(store.acquire("s"), "session_busy");
    expect(error.message).toContain(`on not-${hostname()}`);
  });

  it("a holder whose process has exited, or that cannot be read, does not hold the session", async () => {
    const gone = worker(["acquire", join(freshDir(), "x.db"), "x"]);
    await gone.exited;
    for (const holder of [
      { pid: gone.child.pid, host: hostname(), token: "t" },
      "not json",
      { pid: 0, host: hostname() },
    ]) {
      const store = await heldBy(holder);
      await (await store.acquire("s")).release();
    }
  });

  it.skipIf(!linux)("a reused pid (same pid, another start time) does not hold the session", async () => {
    const start = stat(process.ppid)?.[19];
    const live = await heldBy({ pid: process.ppid, host: hostname(), start, token: "t" });
    await rejectsWith(live.acquire("s"), "session_busy");
    const reused = await heldBy({ pid: process.ppid, host: hostname(), start: `${start}0`, token: "t" });
    await (await reused.acquire("s")).release();
  });

  it("two stores in one process exclude each other; closing one releases what it held", async () => {
    const file = join(freshDir(), "agentloop.db");
    const a = await sqliteStore(file);
    const b = await sqliteStore(file);
    onTestFinished(() => b.close());
    const held = await a.acquire("s");
    await held.checkpoint({ messages: [{ role: "user", content: "a" }] });
    const error = await rejectsWith(b.acquire("s"), "session_busy");
    expect(error.message).toContain("this process");
    await a.close();
    const taken = await b.acquire("s");
    expect(taken.session.messages).toEqual([{ role: "user", content: "a" }]);
    await taken.release();
  });
});

describe("SQLite store: files it must refuse, left byte for byte as they were", () => {
  async function refused(file: string, code: StoreErrorCode): Promise<StoreError> {
    const before = readFileSync(file);
    const error = await rejectsWith(sqliteStore(file), code);
    expect(error.message).toContain(file);
    expect(readFileSync(file).equals(before)).toBe(true);
    return error;
  }

  it("random bytes, a text file and a foreign SQLite database are not agentloop databases", async () => {
    const dir = freshDir();
    const random = join(dir, "random.db");
    writeFileSync(random, Buffer.from(Array.from({ length: 8192 }, (_, i) => (i * 7919 + 13) % 251)));
    const text = join(dir, "notes.txt");
    writeFileSync(text, "# my notes\nnot a database at all\n");
    const foreign = join(dir, "foreign.db");
    const db = new DatabaseSync(foreign);
    db.exec(
      "CREATE TABLE sessions (x TEXT); INSERT INTO sessions VALUES ('theirs'); PRAGMA user_version = 1",
    );
    db.close();
    const marked = join(dir, "marked.db");
    const other = new DatabaseSync(marked);
    other.exec("PRAGMA application_id = 1234");
    other.close();
    for (const file of [random, text, foreign, marked]) {
      const error = await refused(file, "corrupt_store");
      expect(error.message).toBe(
        `${file} is not an agentloop database: move it away or set AGENTLOOP_DB to another file`,
      );
    }
  });

  it("a database from a newer agentloop asks for an upgrade", async () => {
    const file = join(freshDir(), "agentloop.db");
    const store = await sqliteStore(file);
    const handle = await store.acquire("kept");
    await handle.checkpoint({ messages: [{ role: "user", content: "kept" }] });
    await store.close();
    const db = new DatabaseSync(file);
    db.exec("PRAGMA user_version = 99");
    db.close();
    const error = await refused(file, "newer_schema");
    expect(error.message).toMatch(/was written by a newer agentloop \(schema 99.*\): upgrade agentloop$/);
  });

  it("a path under a file cannot be created", async () => {
    const dir = freshDir();
    writeFileSync(join(dir, "file"), "x");
    const error = await rejectsWith(sqliteStore(join(dir, "file", "agentloop.db")), "store_unwritable");
    expect(error.message).toContain("AGENTLOOP_DB");
    expect(readFileSync(join(dir, "file"), "utf8")).toBe("x");
  });

  it.skipIf(!linux)("a folder that binds root too (/proc) is store_unwritable", async () => {
    const error = await rejectsWith(sqliteStore(`/proc/agentloop-${process.pid}.db`), "store_unwritable");
    expect(error.message).toContain("make it and its folder writable or set AGENTLOOP_DB to another file");
  });

  it("a read-only folder is store_unwritable, and the file is unchanged (skipped where chmod binds nobody, e.g. root)", async (ctx) => {
    const dir = freshDir();
    const file = join(dir, "agentloop.db");
    const store = await sqliteStore(file);
    await (await store.acquire("kept")).checkpoint({ messages: [{ role: "user", content: "kept" }] });
    await store.close();
    const before = readFileSync(file);
    chmodSync(file, 0o444);
    chmodSync(dir, 0o555);
    onTestFinished(() => chmodSync(dir, 0o755));
    try {
      writeFileSync(join(dir, "probe"), "");
      ctx.skip("this user can write to a read-only folder (root)");
    } catch {}
    await rejectsWith(
      (async () => {
        const readOnly = await sqliteStore(file);
        const handle = await readOnly.acquire("kept");
        await handle.checkpoint({ messages: [{ role: "user", content: "lost" }] });
      })(),
      "store_unwritable",
    );
    await rejectsWith(sqliteStore(join(dir, "sub", "new.db")), "store_unwritable");
    expect(readFileSync(file).equals(before)).toBe(true);
  });

  it.skipIf(!linux)(
    "a full disk is store_unwritable, and every checkpoint before it stays intact",
    async () => {
      // A file size limit (ulimit -f, which binds root too) stands in for a full disk.
      const file = join(freshDir(), "agentloop.db");
      const full = worker(["fill", file, "full"], "bash", [
        "-c",
        `ulimit -f 1024 && exec "${process.execPath}" "$0" "$@"`,
      ]);
      await full.exited;
      const outcome = JSON.parse(await full.line()) as { written: number; code: string; message: string };
      expect(outcome.code).toBe("store_unwritable");
      expect(outcome.message).toContain(file);
      expect(outcome.written).toBeGreaterThan(10);
      const store = await sqliteStore(file);
      onTestFinished(() => store.close());
      const handle = await store.acquire("full");
      expect(handle.session.messages.map((m) => Number.parseInt(m.content, 10))).toEqual(
        Array.from({ length: outcome.written }, (_, i) => i),
      );
      await handle.checkpoint({ messages: [{ role: "user", content: "after" }] });
      expect((await store.read("full"))?.summary.messageCount).toBe(outcome.written + 1);
      await handle.release();
    },
  );
});
