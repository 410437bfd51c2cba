// The PostgreSQL store beyond the shared contract (test/store.test.ts): several stores (pools,
// processes) on one database, leases that expire, migrations racing, and bad URLs.
import { type ChildProcess, spawn } from "node:child_process";
import { createServer } from "node:net";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { postgresStore, type SessionHandle, type SessionStore, type StoreError } from "../src/store/index.js";
import { type Postgres, skipReason, startPostgres, storeRejection } from "./support/postgres.js";

const STORE = new URL("../dist/store/index.js", import.meta.url).href;

const rejection = storeRejection;

/** A process that holds `sessionId` with a short lease, stores a running run, prints "held" and stays. */
function holdInChild(url: string, sessionId: string, leaseMs: number): Promise<ChildProcess> {
  const script = `
    const { postgresStore } = await import(${JSON.stringify(STORE)});
    const store = await postgresStore(process.env.DB_URL, { leaseMs: ${leaseMs} });
    const handle = await store.acquire(${JSON.stringify(sessionId)});
    await handle.checkpoint({
      messages: [{ role: "user", content: "from the child" }],
      run: { runId: "child-run", status: "running", state: { step: 1 } },
    });
    console.log("held");
    handle.lost?.addEventListener("abort", () => console.log(JSON.stringify({ lost: handle.lost.reason.message })));
    // A line on stdin: try one more checkpoint and print its outcome.
    process.stdin.on("data", () =>
      handle.checkpoint({ messages: [{ role: "user", content: "late" }] }).then(
        () => console.log(JSON.stringify({ written: true })),
        (error) => console.log(JSON.stringify({ code: error.code, message: error.message })),
      ),
    );`;
  const child = spawn(process.execPath, ["--input-type=module", "-e", script], {
    env: { ...process.env, DB_URL: url },
    stdio: ["pipe", "pipe", "inherit"],
  });
  return new Promise((resolve, reject) => {
    child.stdout?.on("data", (chunk: Buffer) => {
      if (chunk.toString().includes("held")) resolve(child);
    });
    child.on("exit", (code) => reject(new Error(`the holding process exited with ${code}`)));
  });
}

/** Acquires `sessionId` as soon as its holder's lease has run out (refused `session_busy` until then). */
async function takeOver(store: SessionStore, sessionId: string): Promise<SessionHandle> {
  for (;;) {
    const handle = await store.acquire(sessionId).catch((error: StoreError) => {
      expect(error.code).toBe("session_busy");
      return undefined;
    });
    if (handle) return handle;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe.skipIf(skipReason !== undefined)(
  `PostgreSQL store across processes ${skipReason ? `(skipped: ${skipReason})` : ""}`,
  () => {
    let pg: Postgres;
    const stores: SessionStore[] = [];
    const children: ChildProcess[] = [];
    const open = async (url: string, leaseMs?: number) => {
      const store = await postgresStore(url, leaseMs === undefined ? {} : { leaseMs });
      stores.push(store);
      return store;
    };
    beforeAll(async () => {
      pg = await startPostgres();
    }, 60_000);
    afterEach(async () => {
      for (const child of children.splice(0)) child.kill("SIGKILL");
      for (const store of stores.splice(0)) await store.close();
    });
    afterAll(() => pg?.stop());

    it("two stores on one database: the second is refused a held session until the first releases it", async () => {
      const url = await pg.database();
      const a = await open(url);
      const b = await open(url);
      const held = await a.acquire("shared");
      await held.checkpoint({ messages: [{ role: "user", content: "from a" }] });
      const busy = await rejection(b.acquire("shared"));
      expect(busy.code).toBe("session_busy");
      expect(busy.message).toContain("session 'shared'");
      expect(await rejection(b.remove("shared"))).toMatchObject({ code: "session_busy" });
      expect((await b.read("shared"))?.summary.status).toBe("running");
      await held.release();
      const taken = await b.acquire("shared");
      expect(taken.session.messages).toEqual([{ role: "user", content: "from a" }]);
      await taken.checkpoint({ messages: [{ role: "user", content: "from b" }] });
      expect((await a.read("shared"))?.messages.map((m) => m.content)).toEqual(["from a", "from b"]);
      expect(await rejection(a.acquire("shared"))).toMatchObject({ code: "session_busy" });
      await taken.release();
    });

    it("a holder that died keeps its session until its lease expires; then another process takes it over", async () => {
      const url = await pg.database();
      const child = await holdInChild(url, "orphan", 1000);
      children.push(child);
      const store = await open(url);
      expect(await rejection(store.acquire("orphan"))).toMatchObject({ code: "session_busy" });
      // Alive and renewing: still refused once the lease it first took has run out.
      const { default: pgDriver } = await import("pg");
      const client = new pgDriver.Client({ connectionString: url });
      await client.connect();
      const firstLease = "SELECT lease_until FROM agentloop_sessions WHERE id = 'orphan'";
      const { lease_until } = (await client.query(firstLease)).rows[0];
      while (!(await client.query("SELECT now() > $1::timestamptz AS past", [lease_until])).rows[0].past)
        await new Promise((resolve) => setTimeout(resolve, 50));
      await client.end();
      expect(await rejection(store.acquire("orphan"))).toMatchObject({ code: "session_busy" });
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGKILL");
      await exited;
      // Dead: nobody renews, so the lease runs out and the session can be taken over.
      const handle = await takeOver(store, "orphan");
      expect(handle.session.summary.status).toBe("interrupted");
      expect(handle.session.messages).toEqual([{ role: "user", content: "from the child" }]);
      expect(handle.session.lastRun).toMatchObject({
        runId: "child-run",
        status: "running",
        state: { step: 1 },
      });
      await handle.checkpoint({ run: { runId: "child-run", status: "completed", state: { step: 2 } } });
      await handle.release();
      expect((await store.read("orphan"))?.summary).toMatchObject({
        status: "completed",
        lastRunId: "child-run",
      });
    });

    it("a holder frozen past its lease loses the session: its late checkpoint writes nothing", async () => {
      const url = await pg.database();
      const child = await holdInChild(url, "frozen", 300);
      children.push(child);
      const store = await open(url);
      child.kill("SIGSTOP"); // a stalled process (a long pause, a partition): it renews nothing
      const handle = await takeOver(store, "frozen");
      await handle.checkpoint({ messages: [{ role: "user", content: "from the new holder" }] });
      const answer = new Promise<string>((resolve) =>
        child.stdout?.once("data", (chunk) => resolve(String(chunk))),
      );
      child.kill("SIGCONT");
      // Its clock says the lease ran out, or its next renewal finds the session taken, whichever
      // comes first: the handle's `lost` signal aborts, so its run can stop.
      expect(JSON.parse(await answer).lost).toMatch(
        /^session 'frozen' was lost: this process could not renew its lease in time( and another took it over|.*gave the session up before the lease ran out)$/,
      );
      const late = new Promise<string>((resolve) =>
        child.stdout?.once("data", (chunk) => resolve(String(chunk))),
      );
      child.stdin?.write("checkpoint\n");
      const outcome = JSON.parse(await late);
      expect(outcome.code).toBe("session_busy");
      expect(outcome.message).toContain("session 'frozen' was lost");
      expect((await store.read("frozen"))?.messages.map((m) => m.content)).toEqual([
        "from the child",
        "from the new holder",
      ]);
      await handle.release();
    });

    it("a checkpoint while the database restarts is retried on a new connection and stored once", async () => {
      const url = await pg.database();
      const store = await open(url);
      const handle = await store.acquire("outage");
      await handle.checkpoint({ messages: [{ role: "user", content: "before" }] });
      await pg.halt();
      let settled = false;
      let during: Promise<void> | undefined;
      try {
        during = handle
          .checkpoint({
            messages: [{ role: "assistant", content: "during" }],
            run: { runId: "outage-run", status: "running", state: { step: 1 } },
          })
          .finally(() => {
            settled = true;
          });
        await new Promise((resolve) => setTimeout(resolve, 300));
        expect(settled).toBe(false); // still trying: the database is down
      } finally {
        await pg.restart(); // whatever happened, the next tests get their database back
      }
      await during;
      await handle.checkpoint({ messages: [{ role: "user", content: "after" }] });
      expect(await store.list({ status: "running" })).toMatchObject([{ id: "outage", messageCount: 3 }]);
      await handle.release();
      const stored = await store.read("outage");
      expect(stored?.messages.map((m) => m.content)).toEqual(["before", "during", "after"]);
      expect(stored?.lastRun).toMatchObject({ runId: "outage-run", state: { step: 1 } });
      expect(await store.list({ status: "interrupted" })).toMatchObject([
        { id: "outage", lastRunId: "outage-run" },
      ]);
      await store.ping();
    });

    it("a database lost for longer than the retries ends the checkpoint and ping with one line naming host and port", async () => {
      const url = await pg.database();
      const store = await open(url, 1000);
      const handle = await store.acquire("gone");
      await pg.halt();
      try {
        const error = await rejection(handle.checkpoint({ messages: [{ role: "user", content: "lost" }] }));
        expect(error.code).toBe("store_error");
        const where = new URL(url).host;
        expect(error.message).toContain(`PostgreSQL at ${where}`);
        expect(await rejection(store.ping())).toMatchObject({ code: "store_error" });
      } finally {
        await pg.restart();
      }
      await store.ping();
      expect((await store.read("gone"))?.messages).toEqual([]);
    });

    it("stores started at once on a new database migrate it once, and all work", async () => {
      const url = await pg.database();
      const many = await Promise.all(Array.from({ length: 6 }, () => open(url)));
      const handles = await Promise.all(many.map((store, i) => store.acquire(`s${i}`)));
      await Promise.all(
        handles.map((h) => h.checkpoint({ messages: [{ role: "user", content: h.sessionId }] })),
      );
      await Promise.all(handles.map((h) => h.release()));
      expect((await many[0]?.list())?.map((s) => s.id).sort()).toEqual(["s0", "s1", "s2", "s3", "s4", "s5"]);
    });

    it("refuses a database written by a newer agentloop, without changing it", async () => {
      const url = await pg.database();
      await (await postgresStore(url)).close();
      const { default: pgDriver } = await import("pg");
      const client = new pgDriver.Client({ connectionString: url });
      await client.connect();
      try {
        await client.query("UPDATE agentloop_schema SET version = 99");
        const error = await rejection(postgresStore(url));
        expect(error.code).toBe("newer_schema");
        expect(error.message).toContain("schema 99");
        expect(error.message).toContain("upgrade agentloop");
        expect((await client.query("SELECT version FROM agentloop_schema")).rows).toEqual([{ version: 99 }]);
      } finally {
        await client.end();
      }
    });
  },
);

describe("PostgreSQL store with a bad URL", () => {
  it("names host and port of an unreachable server, never the password", async () => {
    const port = await new Promise<number>((resolve) => {
      const server = createServer().listen(0, "127.0.0.1", () => {
        const { port } = server.address() as { port: number };
        server.close(() => resolve(port));
      });
    });
    const error = await rejection(postgresStore(`postgres://agent:s3cret-pw@127.0.0.1:${port}/sessions`));
    expect(error.code).toBe("store_error");
    expect(error.message).toMatch(new RegExp(`^cannot reach PostgreSQL at 127\\.0\\.0\\.1:${port}: `));
    expect(error.message).not.toContain("s3cret-pw");
  });

  it("says what a PostgreSQL URL looks like when given something else", async () => {
    for (const url of ["not a url", "mysql://u:pw@h/db"]) {
      const error = await rejection(postgresStore(url));
      expect(error.code).toBe("store_error");
      expect(error.message).toContain("postgres://user:password@host:port/database");
      expect(error.message).not.toContain("pw");
    }
  });
});
