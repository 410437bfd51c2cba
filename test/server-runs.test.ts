import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { Agent, defineTool, type Message } from "../src/index.js";
import { memoryStore, type SessionStore, sqliteStore } from "../src/store/index.js";
import { type ScriptedStep, scriptedModel } from "../src/testing/index.js";
import { type Chunk, type Completion, contentOf, errorOf, post, sse, toolResults } from "./support/http.js";
import { listen } from "./support/listen.js";

/** `read_note` runs at once; `write_note` needs approval. `ran` records what ran. */
function notesAgent(script: ScriptedStep[] | ((messages: readonly Message[]) => ScriptedStep)) {
  const ran: string[] = [];
  const read = defineTool({
    name: "read_note",
    description: "Reads the note.",
    parameters: z.object({}),
    execute: () => {
      ran.push("read");
      return "old note";
    },
  });
  const write = defineTool({
    name: "write_note",
    description: "Writes the note.",
    parameters: z.object({ text: z.string() }),
    needsApproval: true,
    execute: ({ text }) => {
      ran.push(`write ${text}`);
      return "saved";
    },
  });
  const model = scriptedModel(typeof script === "function" ? (request) => script(request.messages) : script);
  return { agent: new Agent({ model, tools: [read, write] }), ran, model };
}

/** A reply that reads (no approval needed) and writes (approval needed) in one iteration. */
const readAndWrite: ScriptedStep = {
  text: "Let me save it.",
  toolCalls: [
    { id: "r1", name: "read_note", arguments: {} },
    { id: "w1", name: "write_note", arguments: { text: "hi" } },
  ],
};
const WAITING = 'Waiting for approval: write_note({"text":"hi"}) [w1]';
const saveHi = { model: "notes", messages: [{ role: "user" as const, content: "Save hi" }] };

const stores: [string, () => Promise<SessionStore>][] = [
  ["memory", async () => memoryStore()],
  ["SQLite", () => sqliteStore(join(mkdtempSync(join(tmpdir(), "agentloop-server-runs-")), "a.db"))],
];

describe.each(stores)("stored runs on the %s store", (_name, open) => {
  it("stores a run in a session of its own; approval_required names the waiting calls; /approvals runs them and answers like a chat completion", async () => {
    const store = await open();
    const { agent, ran, model } = notesAgent([readAndWrite, { text: "Saved it." }]);
    const { client, baseURL } = await listen({ agents: { notes: agent }, store });
    const completion = (await client.chat.completions.create(saveHi)) as Completion;
    const runId = completion.id;
    expect(completion.choices[0]?.finish_reason).toBe("stop");
    expect(completion.choices[0]?.message.content).toBe(`Let me save it.\n\n${WAITING}`);
    const pendingApprovals = [{ id: "w1", name: "write_note", arguments: { text: "hi" } }];
    expect(completion.agentloop).toMatchObject({
      type: "turn_complete",
      stopReason: "approval_required",
      runId,
      sessionId: runId,
      pendingApprovals,
    });
    // The call that needs no approval ran; the waiting one did not.
    expect(ran).toEqual(["read"]);
    expect(await store.sessionOfRun(runId)).toBe(runId);
    const view = await fetch(`${baseURL}/runs/${runId}`);
    expect(await view.json()).toEqual({
      id: runId,
      object: "agentloop.run",
      sessionId: runId,
      status: "waiting",
      stopReason: "approval_required",
      pendingApprovals,
      output: "Let me save it.",
      iterations: 1,
    });

    const res = await post(`${baseURL}/runs/${runId}/approvals`, { approve: ["w1"] });
    expect(res.status).toBe(200);
    const answer = (await res.json()) as Completion;
    expect(answer).toMatchObject({
      id: runId,
      object: "chat.completion",
      model: "notes",
      choices: [{ message: { role: "assistant", content: "Saved it." }, finish_reason: "stop" }],
      agentloop: { type: "turn_complete", stopReason: "final_answer", runId, iterations: 2 },
    });
    expect(ran).toEqual(["read", "write hi"]);
    // The model read both results, in call order.
    expect(toolResults(model.requests[1]?.messages ?? [])).toEqual([
      ["r1", "old note", false],
      ["w1", "saved", false],
    ]);
    expect(await (await fetch(`${baseURL}/runs/${runId}`)).json()).toMatchObject({
      status: "completed",
      stopReason: "final_answer",
      output: "Saved it.",
      iterations: 2,
    });
    const stored = await store.read(runId);
    expect(stored?.messages.map((m) => m.role)).toEqual(["user", "assistant", "tool", "tool", "assistant"]);

    // Done once: a second decision is a 409 saying where the run stands.
    const again = await post(`${baseURL}/runs/${runId}/approvals`, { approve: "all" });
    expect(again.status).toBe(409);
    expect(await errorOf(again)).toEqual({
      message: `Run ${runId} is not waiting for approvals: it has completed (final_answer).`,
      type: "conflict_error",
      code: "run_not_waiting",
      param: null,
    });
    await store.close();
  });
});

describe("stored runs", () => {
  it("streams the stop and the continuation: pendingApprovals in the last chunk, the same id throughout", async () => {
    const store = memoryStore();
    const { agent, ran } = notesAgent([readAndWrite, { text: "Saved it." }]);
    const { client, baseURL } = await listen({ agents: { notes: agent }, store });
    const chunks: Chunk[] = [];
    for await (const chunk of await client.chat.completions.create({ ...saveHi, stream: true }))
      chunks.push(chunk);
    const runId = chunks[0]?.id as string;
    expect(contentOf(chunks)).toBe(`Let me save it.\n\n${WAITING}`);
    expect(chunks.flatMap((c) => (c.agentloop ? [c.agentloop.type] : []))).toEqual([
      "tool_call",
      "tool_call",
      "approval_request",
      "tool_result",
      "turn_complete",
    ]);
    const last = chunks.at(-1);
    expect(last?.choices[0]?.finish_reason).toBe("stop");
    expect(last?.agentloop).toMatchObject({
      type: "turn_complete",
      stopReason: "approval_required",
      runId,
      pendingApprovals: [{ id: "w1", name: "write_note", arguments: { text: "hi" } }],
    });

    const res = await post(`${baseURL}/runs/${runId}/approvals`, {
      approve: "all",
      stream: true,
      stream_options: { include_usage: true },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    const continuation = await sse(res);
    expect(continuation.done).toBe(true);
    expect(new Set(continuation.chunks.map((c) => c.id))).toEqual(new Set([runId]));
    expect(contentOf(continuation.chunks)).toBe("Saved it.");
    const events = continuation.chunks.flatMap((c) => (c.agentloop ? [c.agentloop] : []));
    expect(events.map((e) => e.type)).toEqual(["tool_call", "tool_result", "turn_complete"]);
    expect(events[1]).toMatchObject({ id: "w1", content: "saved", isError: false, runId });
    expect(events[2]).toMatchObject({ stopReason: "final_answer", runId });
    expect(continuation.chunks.at(-1)?.usage).toBeDefined();
    expect(ran).toEqual(["read", "write hi"]);
  });

  it("denies: the model reads that the user declined, and the tool never runs", async () => {
    const store = memoryStore();
    const { agent, ran, model } = notesAgent([readAndWrite, { text: "Not saved, as you wish." }]);
    const { client, baseURL } = await listen({ agents: { notes: agent }, store });
    const { id } = await client.chat.completions.create(saveHi);
    const res = await post(`${baseURL}/runs/${id}/approvals`, { deny: ["w1"] });
    expect(((await res.json()) as Completion).choices[0]?.message.content).toBe("Not saved, as you wish.");
    expect(ran).toEqual(["read"]);
    expect(toolResults(model.requests[1]?.messages ?? [])).toEqual([
      ["r1", "old note", false],
      ["w1", "The user declined this call: it was not run.", true],
    ]);
  });

  it("refuses what it cannot do: no store (501), unknown run (404), bad decisions (400), a run not waiting or not interrupted (409), while draining (503)", async () => {
    const bare = await listen({ agents: { notes: notesAgent([]).agent } });
    for (const res of [
      await post(`${bare.baseURL}/runs/chatcmpl-x/approvals`, { approve: "all" }),
      await post(`${bare.baseURL}/runs/chatcmpl-x/resume`, {}),
      await fetch(`${bare.baseURL}/runs/chatcmpl-x`),
      await post(`${bare.baseURL}/chat/completions`, saveHi, { "x-agentloop-session": "s1" }),
    ]) {
      expect(res.status).toBe(501);
      const error = await errorOf(res);
      expect(error.code).toBe("no_store");
      expect(error.message).toContain("AGENTLOOP_DB");
    }

    const store = memoryStore();
    const { agent, ran } = notesAgent([readAndWrite]);
    const { client, baseURL, server } = await listen({ agents: { notes: agent }, store });
    const unknown = await post(`${baseURL}/runs/chatcmpl-nope/approvals`, { approve: "all" });
    expect(unknown.status).toBe(404);
    expect((await errorOf(unknown)).code).toBe("run_not_found");
    expect((await fetch(`${baseURL}/runs/chatcmpl-nope`)).status).toBe(404);

    const { id } = await client.chat.completions.create(saveHi);
    const approvals = `${baseURL}/runs/${id}/approvals`;
    const refusals: [unknown, string][] = [
      [{}, "Nothing to decide"],
      [{ approve: [], deny: [] }, "Nothing to decide"],
      [{ approve: "all", deny: "all" }, 'cannot both be "all"'],
      [{ approve: ["w1"], deny: ["w1"] }, "Call 'w1' is both approved and denied"],
      [{ approve: "some" }, "approve"],
      ["{not json", "not valid JSON"],
    ];
    for (const [body, message] of refusals) {
      const res = await post(approvals, body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect((await errorOf(res)).message).toContain(message);
    }
    const wrongCall = await post(approvals, { approve: ["w1", "w9"] });
    expect(wrongCall.status).toBe(400);
    expect(await errorOf(wrongCall)).toMatchObject({
      code: "unknown_call",
      message: "No call 'w9' waits for approval; waiting: w1 (write_note).",
    });
    const wrongModel = await post(approvals, { approve: "all", model: "other" });
    expect(wrongModel.status).toBe(404);
    const resume = await post(`${baseURL}/runs/${id}/resume`, {});
    expect(resume.status).toBe(409);
    expect(await errorOf(resume)).toMatchObject({
      code: "run_not_interrupted",
      message: `Run ${id} was not interrupted: it waits for approvals: POST /v1/runs/${id}/approvals.`,
    });
    // The refusals changed nothing: the call still waits and has not run.
    expect(ran).toEqual(["read"]);
    expect(await (await fetch(`${baseURL}/runs/${id}`)).json()).toMatchObject({ status: "waiting" });
    // A draining server takes no continuations either: another replica sharing the store can.
    server.drain();
    const draining = await post(approvals, { approve: "all" });
    expect(draining.status).toBe(503);
    expect((await errorOf(draining)).code).toBe("shutting_down");
    expect((await post(`${baseURL}/runs/${id}/resume`, {})).status).toBe(503);
  });

  it("applies the API's auth, origin, content-type and body-size checks to /v1/runs", async () => {
    const store = memoryStore();
    const { agent } = notesAgent([readAndWrite]);
    const key = "runs-key";
    const { client, baseURL } = await listen(
      { agents: { notes: agent }, store, apiKey: key, maxBodyBytes: 1000 },
      key,
    );
    const { id } = await client.chat.completions.create(saveHi);
    const auth = { authorization: `Bearer ${key}` };
    const approvals = `${baseURL}/runs/${id}/approvals`;
    expect((await post(approvals, { approve: "all" })).status).toBe(401);
    expect((await fetch(`${baseURL}/runs/${id}`)).status).toBe(401);
    expect(
      (await post(approvals, { approve: "all" }, { ...auth, origin: "http://evil.example" })).status,
    ).toBe(403);
    expect(
      (await post(approvals, { approve: "all" }, { ...auth, "content-type": "text/plain" })).status,
    ).toBe(415);
    expect((await post(approvals, { approve: ["x".repeat(2000)] }, auth)).status).toBe(413);
    expect((await fetch(`${baseURL}/runs/${id}`, { headers: auth })).status).toBe(200);
  });
});
