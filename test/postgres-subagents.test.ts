// Sub-agents on PostgreSQL replicas (SPEC sections 9 and 10): an `agentloop serve` replica killed
// with SIGKILL while a child's tool runs; another replica resumes the top-level run, which
// continues the child where it stopped: its finished call is not run again, no run's model is
// asked again for a reply it gave.
import { readFileSync, writeFileSync } from "node:fs";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { FakeRequest } from "../src/testing/fake-http.js";
import { type FakeOpenAIServer, startFakeOpenAIServer } from "../src/testing/fake-openai-server.js";
import { type Postgres, skipReason, startPostgres } from "./support/postgres.js";
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

/** Who asks (the top-level run or the worker) and after how many replies of its own. */
function asker(request: FakeRequest): string {
  const messages = messagesOf(request);
  const system = messages.find((m) => m.role === "system")?.content ?? "";
  const replies = messages.filter((m) => m.role === "assistant").length;
  return `${system.includes("You are the worker.") ? "worker" : "top"}:${replies}`;
}

describe.skipIf(skipReason !== undefined)(
  `sub-agents on agentloop serve replicas on one PostgreSQL ${skipReason ? `(skipped: ${skipReason})` : ""}`,
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

    it("a replica killed while a child's tool runs: another resumes the tree, and nothing finished runs again", async () => {
      const w = workspace();
      const config = JSON.parse(readFileSync(w.config, "utf8")) as object;
      writeFileSync(
        w.config,
        JSON.stringify({
          ...config,
          instructions: "You coordinate.",
          agents: {
            worker: {
              description: "Notes and waits.",
              instructions: "You are the worker.",
              tools: ["note", "wait_for_file"],
            },
          },
        }),
      );
      upstream = await startFakeOpenAIServer({
        respond: (request) => {
          switch (asker(request)) {
            case "top:0":
              return {
                toolCalls: [
                  {
                    id: "d1",
                    name: "delegate_task",
                    arguments: { agent: "worker", task: "Note, then wait." },
                  },
                ],
              };
            case "worker:0":
              return NOTE_THEN_WAIT;
            case "worker:1":
              return { text: "The worker is done." };
            default:
              return { text: "All done." };
          }
        },
      });
      const db = await databaseOf(pg);
      const env = replicaEnv(upstream.url, db);
      const a = startServe(env, ["--config", w.config, "--lease", "1"]);
      const res = await chat(await a.url(), "delegate it", undefined, { stream: true });
      // The child's note is stored (its result event went out) and its wait runs.
      const { seen, reader } = await readUntil(res, /"type":"tool_result","id":"n1"[^}]*"parentCallId":"d1"/);
      await expect.poll(w.lines).toContain("wait started");
      const runId = /"id":"(chatcmpl-[^"]+)"/.exec(seen)?.[1] as string;
      a.child.kill("SIGKILL");
      await a.exited;
      await reader.read().catch(() => {});
      writeFileSync(w.gate, "");

      const b = startServe(env, ["--config", w.config]);
      const urlB = await b.url();
      let answer: Response;
      for (;;) {
        answer = await post(`${urlB}/v1/runs/${runId}/resume`, {});
        if (answer.status === 200) break;
        expect(answer.status).toBe(409); // until A's lease runs out
        await answer.body?.cancel();
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      expect(await answer.json()).toMatchObject({
        id: runId,
        choices: [{ message: { content: "All done." } }],
        agentloop: { type: "turn_complete", stopReason: "final_answer", iterations: 2 },
      });
      // The child's note ran once; its wait, in flight at the kill, ran again and finished once.
      const tools = w.lines();
      expect(tools.filter((l) => l === "note one")).toHaveLength(1);
      expect(tools.filter((l) => l === "wait started")).toHaveLength(2);
      expect(tools.filter((l) => l === "wait done")).toHaveLength(1);
      // Each reply of each run was asked for once.
      expect(upstream.requests.map(asker)).toEqual(["top:0", "worker:0", "worker:1", "top:1"]);
      const childResults = messagesOf(upstream.requests[2] as FakeRequest)
        .filter((m) => m.role === "tool")
        .map((m) => [m.tool_call_id, m.content]);
      expect(childResults).toEqual([
        ["n1", "noted"],
        ["w1", "gate open"],
      ]);
      const topResults = messagesOf(upstream.requests[3] as FakeRequest).filter((m) => m.role === "tool");
      expect(topResults.map((m) => [m.tool_call_id, m.content])).toEqual([["d1", "The worker is done."]]);
      await stopAll(b);
    }, 60_000);
  },
);
