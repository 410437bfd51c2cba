// Replicas on one PostgreSQL when things go wrong between them: orphans a replica cannot read (a
// rolling upgrade), a replica frozen past its lease whose run another took over, a CLI run that
// loses its lease, and a run resumed by a replica serving another model.
import { writeFileSync } from "node:fs";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { postgresStore, type RunRecord, type SessionHandle } from "../src/store/index.js";
import type { FakeRequest } from "../src/testing/fake-http.js";
import { type FakeOpenAIServer, startFakeOpenAIServer } from "../src/testing/fake-openai-server.js";
import { runCli } from "./helpers.js";
import { type Postgres, skipReason, startPostgres } from "./support/postgres.js";
import {
  chat,
  databaseOf,
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

/** Notes, waits for the gate, then answers "All done." once the tools' results are in. */
const noteWaitDone = (request: FakeRequest) =>
  messagesOf(request).at(-1)?.role === "tool" ? { text: "All done." } : NOTE_THEN_WAIT;

// Each test starts several serve processes (each with its MCP server): slow on a busy machine.
describe.skipIf(skipReason !== undefined)(
  `replicas on one PostgreSQL, when things go wrong ${skipReason ? `(skipped: ${skipReason})` : ""}`,
  () => {
    let pg: Postgres;
    let upstream: FakeOpenAIServer | undefined;
    beforeAll(async () => {
      pg = await startPostgres();
    }, 60_000);
    /** Kills the CLI process a test started (a run that should have stopped and did not). */
    let killCli: (signal: NodeJS.Signals) => void = () => {};
    afterEach(async () => {
      killCli("SIGKILL");
      killCli = () => {};
      await upstream?.close();
      upstream = undefined;
    });
    afterAll(() => pg?.stop());

    const database = () => databaseOf(pg);
    const envFor = (db: string) => replicaEnv(upstream?.url, db);

    /** Starts a run on a replica with a 1 s lease, mid-tool (waiting for the gate), then kills the replica. */
    async function orphan(w: ReturnType<typeof workspace>, env: Record<string, string>, session: string) {
      const a = startServe(env, ["--config", w.config, "--lease", "1"]);
      const res = await chat(await a.url(), "note one, then wait", session, { stream: true });
      const { seen, reader } = await readUntil(res, /"type":"tool_result","id":"n1"/);
      await expect.poll(w.lines).toContain("wait started");
      a.child.kill("SIGKILL");
      await a.exited;
      await reader.read().catch(() => {});
      return /"id":"(chatcmpl-[^"]+)"/.exec(seen)?.[1] as string;
    }

    it("--resume-orphans logs each orphan it cannot read once, passes over it, and resumes the others", async () => {
      const w = workspace();
      upstream = await startFakeOpenAIServer({ respond: noteWaitDone });
      const db = await database();
      const env = envFor(db);
      const runId = await orphan(w, env, "good");
      writeFileSync(w.gate, "");
      const store = await postgresStore(db);
      let good: RunRecord | undefined;
      try {
        good = (await store.read("good"))?.lastRun;
        // Runs a newer agentloop stored (a rolling upgrade): a state of a version this one cannot read.
        for (const id of ["newer-1", "newer-2"]) {
          const handle = await store.acquire(id);
          await handle.checkpoint({
            messages: [{ role: "user", content: "from a newer agentloop" }],
            run: { runId: `run-${id}`, status: "running", state: { version: 99 } },
          });
          await handle.release();
        }
      } finally {
        await store.close();
      }

      const b = startServe(env, ["--config", w.config, "--resume-orphans", "--lease", "1"]);
      await b.waitFor(new RegExp(`resumed run ${runId} \\(session good\\): final_answer`));
      for (const id of ["newer-1", "newer-2"])
        await b.waitFor(
          new RegExp(
            `interrupted run run-${id} \\(session ${id}\\) cannot be resumed here \\(This run state has version 99; this agentloop continues version 1\\): left for a replica that can`,
          ),
        );
      // A later orphan, newer than the unreadable ones, is still found by a later scan.
      const again = await postgresStore(db);
      try {
        const handle = await again.acquire("good-2");
        const state = { ...(good?.state as object), runId: "run-good-2", sessionId: "good-2" };
        await handle.checkpoint({
          messages: (await again.read("good"))?.messages.slice(0, 3),
          run: { runId: "run-good-2", status: "running", state },
        });
        await handle.release();
      } finally {
        await again.close();
      }
      await b.waitFor(/resumed run run-good-2 \(session good-2\): final_answer/);
      for (const id of ["newer-1", "newer-2"])
        expect(
          b
            .stderr()
            .split("\n")
            .filter((l) => l.includes(`session ${id})`)),
        ).toHaveLength(1);
      expect(w.lines().filter((l) => l === "note one")).toHaveLength(1);
      await stopAll(b);
    }, 60_000);

    it("a replica frozen past its lease, whose run another took over, ends its stream with session_lost saying so, and counts the lost lease", async () => {
      const w = workspace();
      upstream = await startFakeOpenAIServer({ respond: noteWaitDone });
      const env = envFor(await database());
      const a = startServe(env, ["--config", w.config, "--lease", "1"]);
      const urlA = await a.url();
      const res = await chat(urlA, "note one, then wait", "frozen", { stream: true });
      const { seen, reader } = await readUntil(res, /"type":"tool_result","id":"n1"/);
      await expect.poll(w.lines).toContain("wait started");
      const runId = /"id":"(chatcmpl-[^"]+)"/.exec(seen)?.[1] as string;
      a.child.kill("SIGSTOP"); // a long pause (a stalled VM, a partition): A renews nothing
      writeFileSync(w.gate, "");

      const b = startServe(env, ["--config", w.config]);
      const urlB = await b.url();
      let resumed: Response;
      for (;;) {
        resumed = await post(`${urlB}/v1/runs/${runId}/resume`, {});
        if (resumed.status === 200) break;
        expect(resumed.status).toBe(409); // until A's lease runs out
        await resumed.body?.cancel();
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      expect(await resumed.json()).toMatchObject({ choices: [{ message: { content: "All done." } }] });

      a.child.kill("SIGCONT");
      let rest = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        rest += new TextDecoder().decode(value);
      }
      const error = JSON.parse(/"agentloop":(\{"type":"error"[^}]*\})/.exec(rest)?.[1] as string);
      expect(error).toEqual({
        type: "error",
        code: "session_lost",
        runId,
        message: `This server gave this run up because it could not renew its lease in time (it was paused, or cut off from the store); another replica (or another process sharing the store) goes on with it, or resumes it: GET /v1/runs/${runId} tells how it ends.`,
      });
      expect(rest.trim().endsWith("data: [DONE]")).toBe(true);
      expect(await (await fetch(`${urlA}/v1/runs/${runId}`)).json()).toMatchObject({
        status: "completed",
        output: "All done.",
      });
      const metrics = await (await fetch(`${urlA}/metrics`)).text();
      expect(metrics).toContain("agentloop_store_leases_lost_total 1");
      expect(metrics).toContain("agentloop_store_leases_held 0");
      expect(await (await fetch(`${urlB}/metrics`)).text()).toContain("agentloop_store_leases_lost_total 0");
      expect(w.lines().filter((l) => l === "note one")).toHaveLength(1);
      await stopAll(a, b);
    }, 60_000);

    it("agentloop run --session that loses its lease stops at once (mid-tool) with one line saying another process took it over", async () => {
      const w = workspace();
      upstream = await startFakeOpenAIServer({ respond: noteWaitDone });
      const db = await database();
      const env = { ...envFor(db), AGENTLOOP_DB_LEASE: "1" };
      const cli = runCli(["run", "--config", w.config, "--session", "cli", "--yes", "note one, then wait"], {
        env,
        cwd: w.dir,
        onSpawn: (kill) => {
          killCli = kill;
        },
      });
      const signal = (name: NodeJS.Signals) => killCli(name);
      const store = await postgresStore(db);
      try {
        await expect.poll(w.lines, { timeout: 15_000 }).toContain("wait started");
        // The note's result stored: the run is in the wait.
        await expect.poll(async () => (await store.read("cli"))?.messages.length).toBe(3);
        signal("SIGSTOP"); // paused past its lease: another process takes the session over
        let handle: SessionHandle | undefined;
        while (!handle) {
          handle = await store.acquire("cli").catch(() => undefined);
          if (!handle) await new Promise((resolve) => setTimeout(resolve, 100));
        }
        signal("SIGCONT");
        // The gate never opens: without the stop, the run would wait in the tool until killed.
        const outcome = await cli;
        expect(outcome.code).toBe(2);
        expect(outcome.stderr.trim().split("\n").at(-1)).toBe(
          "agentloop: session 'cli' was lost: this process could not renew its lease in time (it was paused, or cut off from the store), so the run stopped here and another process may take it over; agentloop sessions shows where it stands",
        );
        expect(outcome.stderr).not.toContain(PASSWORD);
        // Nothing it did after losing the session was stored.
        expect((await store.read("cli"))?.messages.map((m) => m.role)).toEqual(["user", "assistant", "tool"]);
        await handle.release();
      } finally {
        await store.close();
      }
    }, 60_000);

    it("a run is resumed only by a replica serving the model it was started with: others answer 409 model_mismatch and leave the orphan", async () => {
      const w = workspace();
      upstream = await startFakeOpenAIServer({ respond: noteWaitDone });
      const db = await database();
      const runId = await orphan(w, { ...envFor(db), AGENTLOOP_MODEL: "model-a" }, "moved");
      writeFileSync(w.gate, "");
      const other = { ...envFor(db), AGENTLOOP_MODEL: "model-b" };
      const b = startServe(other, ["--config", w.config, "--resume-orphans", "--lease", "1"]);
      const urlB = await b.url();
      await b.waitFor(
        new RegExp(
          `interrupted run ${runId} \\(session moved\\) cannot be resumed here \\(Run ${runId} was started with model 'model-a', which this server does not serve \\(it serves 'model-b'\\)\\): left for a replica that can`,
        ),
      );
      const refused = await post(`${urlB}/v1/runs/${runId}/resume`, {});
      expect(refused.status).toBe(409);
      expect(await refused.json()).toMatchObject({
        error: {
          code: "model_mismatch",
          message: `Run ${runId} was started with model 'model-a', which this server does not serve (it serves 'model-b'): continue it on a replica that serves 'model-a', or name a served model in "model" to continue it with that one.`,
        },
      });
      expect(upstream.requests).toHaveLength(1);

      const a = startServe({ ...envFor(db), AGENTLOOP_MODEL: "model-a" }, ["--config", w.config]);
      const resumed = await post(`${await a.url()}/v1/runs/${runId}/resume`, {});
      expect(resumed.status).toBe(200);
      expect(await resumed.json()).toMatchObject({
        model: "model-a",
        choices: [{ message: { content: "All done." } }],
      });
      expect(upstream.requests.map((r) => r.body.model)).toEqual(["model-a", "model-a"]);
      expect(
        b
          .stderr()
          .split("\n")
          .filter((l) => l.includes("(session moved)")),
      ).toHaveLength(1);
      await stopAll(a, b);
    }, 60_000);
  },
);
