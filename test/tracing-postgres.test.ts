// A run stored on PostgreSQL keeps its trace context: paused for approval on one `agentloop serve`
// replica (joining the caller's trace through `traceparent`) and approved through another, its
// continuation is in the same trace, under the run's first span. Both replicas export to a real
// OTLP receiver.
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { type FakeOpenAIServer, startFakeOpenAIServer } from "../src/testing/fake-openai-server.js";
import { type OtlpReceiver, startOtlpReceiver } from "./support/otlp-receiver.js";
import { type Postgres, skipReason, startPostgres } from "./support/postgres.js";
import { databaseOf, post, replicaEnv, stopAll, workspace } from "./support/replicas.js";
import { startServe } from "./support/serve-process.js";

describe.skipIf(skipReason !== undefined)(
  `traces of runs stored on PostgreSQL ${skipReason ? `(skipped: ${skipReason})` : ""}`,
  () => {
    let pg: Postgres;
    let upstream: FakeOpenAIServer | undefined;
    let receiver: OtlpReceiver | undefined;
    beforeAll(async () => {
      pg = await startPostgres();
    }, 60_000);
    afterEach(async () => {
      await upstream?.close();
      await receiver?.close();
      upstream = receiver = undefined;
    });
    afterAll(() => pg?.stop());

    it("a run paused on one replica and approved through another continues the caller's trace", async () => {
      const w = workspace({ require: ["note"] });
      upstream = await startFakeOpenAIServer({
        respond: [
          { text: "Noting.", toolCalls: [{ id: "n1", name: "note", arguments: { text: "approved" } }] },
          { text: "Noted it." },
        ],
      });
      receiver = await startOtlpReceiver();
      const env = {
        ...replicaEnv(upstream.url, await databaseOf(pg)),
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      };
      const a = startServe(env, ["--config", w.config]);
      const b = startServe(env, ["--config", w.config]);
      const [urlA, urlB] = await Promise.all([a.url(), b.url()]);
      const traceId = "0af7651916cd43dd8448eb211c80319c";
      const caller = "b7ad6b7169203331";
      const paused = await fetch(`${urlA}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", traceparent: `00-${traceId}-${caller}-01` },
        body: JSON.stringify({ messages: [{ role: "user", content: "note it" }] }),
      });
      const first = (await paused.json()) as {
        id: string;
        agentloop: { stopReason: string; traceId: string };
      };
      expect(first.agentloop).toMatchObject({ stopReason: "approval_required", traceId });
      // Another replica, and a request with no trace context of its own.
      const approved = await post(`${urlB}/v1/runs/${first.id}/approvals`, { approve: ["n1"] });
      expect(approved.status).toBe(200);
      const second = (await approved.json()) as { agentloop: { stopReason: string; traceId: string } };
      expect(second.agentloop).toMatchObject({ stopReason: "final_answer", traceId });
      expect(w.lines()).toEqual(["note approved"]);
      await stopAll(a, b);

      const runs = receiver.spans.filter((s) => s.name === "invoke_agent agentloop");
      expect(runs).toHaveLength(2);
      const [before, after] = runs.sort((x, y) =>
        x.parentSpanId === caller ? -1 : y.parentSpanId === caller ? 1 : 0,
      );
      expect(before?.traceId).toBe(traceId);
      expect(before?.parentSpanId).toBe(caller);
      expect(before?.attributes["agentloop.stop_reason"]).toBe("approval_required");
      expect(after?.traceId).toBe(traceId);
      expect(after?.parentSpanId).toBe(before?.spanId);
      expect(after?.attributes["agentloop.stop_reason"]).toBe("final_answer");
      const note = receiver.spans.find((s) => s.name === "execute_tool note");
      expect(note?.parentSpanId).toBe(after?.spanId);
    });
  },
);
