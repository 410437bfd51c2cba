// A holder cut off from PostgreSQL (a TCP proxy that stops forwarding: nothing answers, nothing
// is refused) gives its sessions up by its own clock before its lease runs out, so two processes
// never run one run at once; and a holder whose release failed in an outage takes its own
// session back at once when the database returns.
import { writeFileSync } from "node:fs";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { postgresStore, type SessionStore } from "../src/store/index.js";
import { type FakeOpenAIServer, startFakeOpenAIServer } from "../src/testing/fake-openai-server.js";
import { type Postgres, skipReason, startPostgres, storeRejection } from "./support/postgres.js";
import {
  chat,
  databaseOf,
  messagesOf,
  NOTE_THEN_WAIT,
  post,
  readUntil,
  replicaEnv,
  stopAll,
  workspace,
} from "./support/replicas.js";
import { startServe } from "./support/serve-process.js";
import { startProxy, type TcpProxy } from "./support/tcp-proxy.js";

const user = (content: string) => ({ role: "user" as const, content });

describe.skipIf(skipReason !== undefined)(
  `a holder cut off from PostgreSQL ${skipReason ? `(skipped: ${skipReason})` : ""}`,
  () => {
    let pg: Postgres;
    let upstream: FakeOpenAIServer | undefined;
    const opened: (SessionStore | TcpProxy)[] = [];
    beforeAll(async () => {
      pg = await startPostgres();
    }, 60_000);
    afterEach(async () => {
      for (const thing of opened.splice(0).reverse()) await thing.close().catch(() => undefined);
      await upstream?.close();
      upstream = undefined;
    });
    afterAll(() => pg?.stop());

    const proxied = async (db: string) => {
      const proxy = await startProxy(db);
      opened.push(proxy);
      return proxy;
    };
    const store = async (url: string, leaseMs?: number) => {
      const s = await postgresStore(url, leaseMs === undefined ? {} : { leaseMs });
      opened.push(s);
      return s;
    };

    it("gives the session up (lost aborts) while its lease still holds when no renewal answers, and writes nothing after", async () => {
      const db = await pg.database();
      const proxy = await proxied(db);
      const a = await store(proxy.url, 3_000);
      const b = await store(db, 3_000);
      const handle = await a.acquire("cut");
      await handle.checkpoint({ messages: [user("before the cut")] });
      proxy.cut(); // every query of `a` now hangs: no answer, no error
      await new Promise((resolve) => handle.lost?.addEventListener("abort", resolve, { once: true }));
      // Given up by its own clock, before the database lets another take the session.
      expect((await storeRejection(b.acquire("cut"))).code).toBe("session_busy");
      const after = await storeRejection(handle.checkpoint({ messages: [user("after the loss")] }));
      expect(after.code).toBe("session_busy");
      expect(after.message).toMatch(/session 'cut' was lost: this process could not renew its lease in time/);
      proxy.heal();
      let taken: Awaited<ReturnType<SessionStore["acquire"]>> | undefined;
      while (!taken) {
        taken = await b.acquire("cut").catch(() => undefined);
        if (!taken) await new Promise((resolve) => setTimeout(resolve, 100));
      }
      expect(taken.session.messages).toEqual([user("before the cut")]);
      await taken.release();
    }, 30_000);

    it("a session whose release failed in an outage is taken back at once by the same store when the database returns; others wait for the lease", async () => {
      const db = await pg.database();
      const a = await store(db);
      const b = await store(db);
      const handle = await a.acquire("outage");
      await pg.halt();
      try {
        await storeRejection(handle.release());
      } finally {
        await pg.restart();
      }
      expect((await storeRejection(b.acquire("outage"))).code).toBe("session_busy");
      const again = await a.acquire("outage");
      await again.release();
      await (await b.acquire("outage")).release();
    }, 30_000);

    it("a replica cut off mid tool call aborts the call before another replica resumes the run, and stores nothing after", async () => {
      const w = workspace();
      upstream = await startFakeOpenAIServer({
        respond: (request) =>
          messagesOf(request).at(-1)?.role === "tool" ? { text: "All done." } : NOTE_THEN_WAIT,
      });
      const db = await databaseOf(pg);
      const proxy = await proxied(db);
      const a = startServe(replicaEnv(upstream.url, proxy.url), ["--config", w.config, "--lease", "3"]);
      const res = await chat(await a.url(), "note one, then wait", "partition", { stream: true });
      const { seen, reader } = await readUntil(res, /"type":"tool_result","id":"n1"/);
      await expect.poll(w.lines).toContain("wait started");
      const runId = /"id":"(chatcmpl-[^"]+)"/.exec(seen)?.[1] as string;
      proxy.cut(); // A is mid tool call, and hears nothing from the database from now on

      const b = startServe(replicaEnv(upstream.url, db), ["--config", w.config]);
      const urlB = await b.url();
      const resumed = (async () => {
        for (;;) {
          const answer = await post(`${urlB}/v1/runs/${runId}/resume`, {});
          if (answer.status === 200) return answer;
          expect(answer.status).toBe(409); // until A's lease runs out
          await answer.body?.cancel();
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
      })();
      // B's copy of the call has started: open the gate (a copy of A's still running would finish too).
      await expect
        .poll(() => w.lines().filter((l) => l === "wait started").length, { timeout: 20_000 })
        .toBe(2);
      writeFileSync(w.gate, "");
      expect(await (await resumed).json()).toMatchObject({
        choices: [{ message: { content: "All done." } }],
      });
      // The note and the wait run side by side: only the wait's records have an order to check.
      const waits = () => w.lines().filter((l) => l.startsWith("wait"));
      expect(waits()).toEqual(["wait started", "wait aborted", "wait started", "wait done"]);
      expect(w.lines().filter((l) => l === "note one")).toHaveLength(1);

      const check = await store(db);
      const stored = (await check.read("partition"))?.messages.map((m) => m.role);
      expect(stored).toEqual(["user", "assistant", "tool", "tool", "assistant"]);
      proxy.heal(); // A hears the database again: it has given the session up, and writes nothing
      let rest = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        rest += new TextDecoder().decode(value);
      }
      expect(rest).toContain('"code":"session_lost"');
      expect(await (await fetch(`${await a.url()}/metrics`)).text()).toContain(
        "agentloop_store_leases_lost_total 1",
      );
      expect((await check.read("partition"))?.messages.map((m) => m.role)).toEqual(stored);
      expect((await check.read("partition"))?.lastRun?.status).toBe("completed");
      expect(waits()).toEqual(["wait started", "wait aborted", "wait started", "wait done"]);
      await stopAll(a, b);
    }, 60_000);
  },
);
