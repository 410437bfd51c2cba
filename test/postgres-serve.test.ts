// Several real `agentloop serve` processes on one real PostgreSQL (issue 13): conversations that
// move between replicas, a replica killed mid-tool whose run finishes on another (exactly once),
// replicas racing for one run, approvals across replicas, orphans resumed by themselves, many
// concurrent sessions, and a database that goes away.
import { writeFileSync } from "node:fs";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { postgresStore } from "../src/store/index.js";
import type { FakeRequest } from "../src/testing/fake-http.js";
import { type FakeOpenAIServer, startFakeOpenAIServer } from "../src/testing/fake-openai-server.js";
import { runCli } from "./helpers.js";
import { type Postgres, skipReason, startPostgres } from "./support/postgres.js";
import {
  chat,
  databaseOf,
  heard,
  messagesOf,
  NOTE_THEN_WAIT,
  PASSWORD,
  post,
  readUntil,
  replicaEnv,
  stopAll,
  workspace,
} from "./support/replicas.js";
import { startServe } from "./support/serve-process.js";

describe.skipIf(skipReason !== undefined)(
  `agentloop serve replicas on one PostgreSQL ${skipReason ? `(skipped: ${skipReason})` : ""}`,
  () => {
    let pg: Postgres;
    let upstream: FakeOpenAIServer | undefined;
    beforeAll(async () => {
      pg = await startPostgres();
    }, 60_000);
    afterEach(async () => {
      await upstream?.close();
      upstream = undefined;
    });
    afterAll(() => pg?.stop());

    const database = () => databaseOf(pg);
    const envFor = (db: string) => replicaEnv(upstream?.url, db);

    it("a conversation alternates between two replicas, each reading what the other stored; /healthz and /metrics report the store", async () => {
      upstream = await startFakeOpenAIServer({ respond: (request) => ({ text: `heard ${heard(request)}` }) });
      const db = await database();
      const a = startServe(envFor(db));
      const b = startServe(envFor(db));
      const [urlA, urlB] = await Promise.all([a.url(), b.url()]);
      const where = new URL(db);
      await a.waitFor(
        new RegExp(
          `runs stored in postgres://127\\.0\\.0\\.1:${where.port}${where.pathname} \\(AGENTLOOP_DB\\)`,
        ),
      );

      const turns = [
        [urlA, "one"],
        [urlB, "two"],
        [urlA, "three"],
        [urlB, "four"],
      ] as const;
      const ids: string[] = [];
      for (const [url, word] of turns) {
        const res = await chat(url, word, "talk");
        expect(res.status).toBe(200);
        const body = (await res.json()) as { id: string; choices: { message: { content: string } }[] };
        ids.push(body.id);
        expect(body.choices[0]?.message.content).toBe(
          `heard ${turns
            .slice(0, ids.length)
            .map(([, w]) => w)
            .join(" | ")}`,
        );
      }
      // Any replica tells where any run stands.
      expect(await (await fetch(`${urlA}/v1/runs/${ids[3]}`)).json()).toMatchObject({
        sessionId: "talk",
        status: "completed",
        stopReason: "final_answer",
      });
      expect(await (await fetch(`${urlB}/v1/runs/${ids[0]}`)).json()).toMatchObject({
        status: "superseded",
        latestRunId: ids[3],
      });

      const health = await fetch(`${urlB}/healthz`);
      expect(health.status).toBe(200);
      expect(await health.json()).toMatchObject({ status: "ok", store: { ok: true } });
      const metrics = await (await fetch(`${urlA}/metrics`)).text();
      expect(metrics).toContain("agentloop_store_up 1");
      expect(metrics).toMatch(/agentloop_store_checkpoint_seconds_count [1-9]\d*/);
      expect(metrics).toContain("agentloop_store_leases_held 0");
      expect(metrics).toContain("agentloop_store_interrupted_runs 0");
      await stopAll(a, b);
    });

    it("a run whose replica is killed mid-tool finishes through another; two replicas racing to resume it run it once", async () => {
      const w = workspace();
      upstream = await startFakeOpenAIServer({ respond: [NOTE_THEN_WAIT, { text: "All done." }] });
      const db = await database();
      const env = envFor(db);
      const a = startServe(env, ["--config", w.config, "--lease", "1"]);
      const res = await chat(await a.url(), "note one, then wait", undefined, { stream: true });
      const { seen, reader } = await readUntil(res, /"type":"tool_result","id":"n1"/);
      await expect.poll(w.lines).toContain("wait started");
      const runId = /"id":"(chatcmpl-[^"]+)"/.exec(seen)?.[1] as string;
      a.child.kill("SIGKILL");
      await a.exited;
      await reader.read().catch(() => {});
      writeFileSync(w.gate, "");

      const b = startServe(env, ["--config", w.config]);
      const c = startServe(env, ["--config", w.config]);
      const [urlB, urlC] = await Promise.all([b.url(), c.url()]);
      // Until A's lease runs out nobody may take the run; then exactly one of the racing replicas does.
      let answers: Response[] = [];
      for (;;) {
        answers = await Promise.all([urlB, urlC].map((url) => post(`${url}/v1/runs/${runId}/resume`, {})));
        if (answers.some((r) => r.status === 200)) break;
        for (const r of answers) {
          expect(r.status).toBe(409);
          await r.body?.cancel();
        }
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      const statuses = answers.map((r) => r.status).sort();
      expect(statuses).toEqual([200, 409]);
      const won = answers.find((r) => r.status === 200) as Response;
      expect(await won.json()).toMatchObject({
        id: runId,
        choices: [{ message: { content: "All done." } }],
        agentloop: { type: "turn_complete", stopReason: "final_answer", iterations: 2 },
      });
      const lost = (await answers.find((r) => r.status === 409)?.json()) as { error: { code: string } };
      expect(["session_busy", "run_not_interrupted"]).toContain(lost.error.code);

      // The note ran once; the wait in flight ran again and finished once; the model was asked twice in all.
      const tools = w.lines();
      expect(tools.filter((l) => l === "note one")).toHaveLength(1);
      expect(tools.filter((l) => l === "wait done")).toHaveLength(1);
      expect(upstream.requests).toHaveLength(2);
      const results = messagesOf(upstream.requests[1] as FakeRequest)
        .filter((m) => m.role === "tool")
        .map((m) => [m.tool_call_id, m.content]);
      expect(results).toEqual([
        ["n1", "noted"],
        ["w1", "gate open"],
      ]);
      await stopAll(b, c);
    });

    it("a run paused for approval on one replica is approved through another", async () => {
      const w = workspace({ require: ["note"] });
      upstream = await startFakeOpenAIServer({
        respond: [
          { text: "Noting.", toolCalls: [{ id: "n1", name: "note", arguments: { text: "approved" } }] },
          { text: "Noted it." },
        ],
      });
      const env = envFor(await database());
      const a = startServe(env, ["--config", w.config]);
      const b = startServe(env, ["--config", w.config]);
      const [urlA, urlB] = await Promise.all([a.url(), b.url()]);
      const paused = (await (await chat(urlA, "note it")).json()) as {
        id: string;
        agentloop: { stopReason: string; pendingApprovals: { id: string }[] };
      };
      expect(paused.agentloop).toMatchObject({
        stopReason: "approval_required",
        pendingApprovals: [{ id: "n1" }],
      });
      expect(w.lines()).toEqual([]);
      const approved = await post(`${urlB}/v1/runs/${paused.id}/approvals`, { approve: ["n1"] });
      expect(approved.status).toBe(200);
      expect(await approved.json()).toMatchObject({
        id: paused.id,
        choices: [{ message: { content: "Noted it." } }],
      });
      expect(w.lines()).toEqual(["note approved"]);
      await stopAll(a, b);
    });

    it("with --resume-orphans a replica finishes a dead replica's run by itself", async () => {
      const w = workspace();
      upstream = await startFakeOpenAIServer({ respond: [NOTE_THEN_WAIT, { text: "All done." }] });
      const env = envFor(await database());
      const a = startServe(env, ["--config", w.config, "--lease", "1"]);
      const res = await chat(await a.url(), "note one, then wait", "orphaned", { stream: true });
      const { seen, reader } = await readUntil(res, /"type":"tool_result","id":"n1"/);
      await expect.poll(w.lines).toContain("wait started");
      const runId = /"id":"(chatcmpl-[^"]+)"/.exec(seen)?.[1] as string;
      a.child.kill("SIGKILL");
      await a.exited;
      await reader.read().catch(() => {});
      writeFileSync(w.gate, "");

      const b = startServe(env, ["--config", w.config, "--resume-orphans", "--lease", "1"]);
      const urlB = await b.url();
      await b.waitFor(/interrupted runs are resumed here by themselves/);
      await b.waitFor(new RegExp(`resumed run ${runId} \\(session orphaned\\): final_answer`));
      expect(await (await fetch(`${urlB}/v1/runs/${runId}`)).json()).toMatchObject({
        status: "completed",
        output: "All done.",
      });
      expect(w.lines().filter((l) => l === "note one")).toHaveLength(1);
      expect(await (await fetch(`${urlB}/metrics`)).text()).toContain(
        "agentloop_orphan_runs_resumed_total 1",
      );
      // The session goes on, on any replica.
      upstream.requests.length = 0;
      const next = await chat(urlB, "and now?", "orphaned");
      expect(next.status).toBe(200);
      await stopAll(b);
    });

    it("2 replicas x 100 concurrent sessions: every message stored once, in order", async () => {
      upstream = await startFakeOpenAIServer({ respond: (request) => ({ text: `heard ${heard(request)}` }) });
      const db = await database();
      const a = startServe(envFor(db));
      const b = startServe(envFor(db));
      const [urlA, urlB] = await Promise.all([a.url(), b.url()]);
      const sessions = Array.from({ length: 100 }, (_, i) => `s${i}`);
      const replies = await Promise.all(
        sessions.map(async (id, i) => {
          // Half start on A and go on on B, half the other way round.
          const [first, second] = i % 2 === 0 ? [urlA, urlB] : [urlB, urlA];
          const one = await chat(first, `${id} first`, id);
          const two = await chat(second, `${id} second`, id);
          const body = (await two.json()) as { choices: { message: { content: string } }[] };
          return { statuses: [one.status, two.status], body };
        }),
      );
      for (const [i, { statuses, body }] of replies.entries()) {
        expect(statuses).toEqual([200, 200]);
        expect(body.choices[0]?.message.content).toBe(`heard s${i} first | s${i} second`);
      }
      const store = await postgresStore(db);
      try {
        const list = await store.list();
        expect(list).toHaveLength(100);
        for (const id of sessions) {
          const stored = await store.read(id);
          expect(stored?.messages.map((m) => [m.role, m.content])).toEqual([
            ["user", `${id} first`],
            ["assistant", `heard ${id} first`],
            ["user", `${id} second`],
            ["assistant", `heard ${id} first | ${id} second`],
          ]);
          expect(stored?.summary.status).toBe("completed");
        }
      } finally {
        await store.close();
      }
      await stopAll(a, b);
    }, 60_000);

    it("a database lost mid-run ends the run with a clear error, /healthz says so, and the run resumes on the same replica as soon as it is back", async () => {
      const w = workspace();
      upstream = await startFakeOpenAIServer({ respond: [NOTE_THEN_WAIT, { text: "All done." }] });
      const env = envFor(await database());
      // The default lease (30 s): the dead run's lease is this replica's own, so it need not wait it out.
      const a = startServe(env, ["--config", w.config]);
      const url = await a.url();
      const res = await chat(url, "note one, then wait", "outage", { stream: true });
      const { seen, reader } = await readUntil(res, /"type":"tool_result","id":"n1"/);
      await expect.poll(w.lines).toContain("wait started");
      const runId = /"id":"(chatcmpl-[^"]+)"/.exec(seen)?.[1] as string;
      await pg.halt();
      try {
        writeFileSync(w.gate, ""); // the wait's result cannot be stored now
        let rest = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          rest += new TextDecoder().decode(value);
        }
        const error = /"agentloop":(\{"type":"error"[^}]*\})/.exec(rest)?.[1];
        expect(JSON.parse(error as string)).toMatchObject({ code: "store_unavailable", runId });
        expect(error).toContain(`POST /v1/runs/${runId}/resume continues it once the store is back`);
        expect(error).toMatch(/PostgreSQL at 127\.0\.0\.1:\d+/);
        expect(rest.trim().endsWith("data: [DONE]")).toBe(true);

        const health = await fetch(`${url}/healthz`);
        expect(health.status).toBe(503);
        expect(await health.json()).toMatchObject({ status: "store_unreachable", store: { ok: false } });
        const refused = await chat(url, "hello?", "other");
        expect(refused.status).toBe(503);
        expect(((await refused.json()) as { error: { code: string } }).error.code).toBe("store_unavailable");
      } finally {
        await pg.restart();
      }
      expect((await fetch(`${url}/healthz`)).status).toBe(200);
      // Nothing stored is lost: the run resumes from its last checkpoint (the note is not run again).
      const resumed = await post(`${url}/v1/runs/${runId}/resume`, {});
      expect(resumed.status).toBe(200);
      expect(await resumed.json()).toMatchObject({ choices: [{ message: { content: "All done." } }] });
      expect(w.lines().filter((l) => l === "note one")).toHaveLength(1);
      await stopAll(a);
    }, 60_000);

    it("agentloop run --session on PostgreSQL: a database lost mid-run is one line naming --resume (exit 2), and --resume finishes the run", async () => {
      const w = workspace();
      upstream = await startFakeOpenAIServer({ respond: [NOTE_THEN_WAIT, { text: "All done." }] });
      // A lease longer than the checkpoint's retries (half of it): the store's failure ends the run
      // before the process gives its lease up.
      const env = { ...envFor(await database()), AGENTLOOP_DB_LEASE: "5" };
      const args = ["run", "--config", w.config, "--session", "cli", "--yes"];
      const first = runCli([...args, "note one, then wait"], { env, cwd: w.dir });
      await expect.poll(w.lines, { timeout: 15_000 }).toContain("wait started");
      await pg.halt();
      let outcome: Awaited<typeof first>;
      try {
        writeFileSync(w.gate, "");
        outcome = await first;
      } finally {
        await pg.restart();
      }
      expect(outcome.code).toBe(2);
      const lines = outcome.stderr.trim().split("\n");
      expect(lines.at(-1)).toMatch(
        /^agentloop: .*PostgreSQL at 127\.0\.0\.1:\d+.*agentloop run --session cli --resume continues the run/,
      );
      expect(outcome.stderr).not.toContain(PASSWORD);
      expect(outcome.stderr).not.toMatch(/^\s+at /m);
      let resumed: Awaited<typeof first>;
      for (;;) {
        resumed = await runCli([...args, "--resume"], { env, cwd: w.dir });
        if (!resumed.stderr.includes("in use")) break;
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
      expect(resumed.stdout.trim()).toBe("All done.");
      expect(resumed.code).toBe(0);
      expect(w.lines().filter((l) => l === "note one")).toHaveLength(1);
      expect(w.lines().filter((l) => l === "wait done").length).toBeGreaterThanOrEqual(1);
    }, 60_000);

    it("refuses an unreachable database at start: one line naming host and port, exit 2, no password", async () => {
      const db = await database();
      const port = Number(new URL(db).port) + 1; // nothing listens there
      const bad = db.replace(`:${new URL(db).port}/`, `:${port}/`);
      for (const command of [["serve", "--port", "0"], ["run", "--session", "s", "hi"], ["sessions"]]) {
        const { code, stderr } = await runCli(command, {
          env: { OPENAI_API_KEY: "sk-x", AGENTLOOP_DB: bad },
        });
        expect(code).toBe(2);
        expect(stderr.trim().split("\n")).toHaveLength(1);
        expect(stderr).toContain(`cannot reach PostgreSQL at 127.0.0.1:${port}`);
        expect(stderr).toContain("(AGENTLOOP_DB)");
        expect(stderr).not.toContain(PASSWORD);
      }
    });
  },
);
