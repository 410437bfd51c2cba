import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { Session } from "../src/agent/session.js";
import { Agent, defineTool, type Message } from "../src/index.js";
import { memoryStore, type SessionStore, sqliteStore } from "../src/store/index.js";
import { type ScriptedStep, scriptedModel } from "../src/testing/index.js";
import { listen } from "./support/listen.js";

type Event = { type: string; [field: string]: unknown };
type WithEvent<T> = T & { agentloop?: Event };
type Completion = WithEvent<OpenAI.Chat.Completions.ChatCompletion>;
type Chunk = WithEvent<OpenAI.Chat.Completions.ChatCompletionChunk>;
interface ErrorBody {
  error: { message: string; type: string; code: string | null; param: string | null };
}

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

const post = (url: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
const errorOf = async (res: Response) => ((await res.json()) as ErrorBody).error;

/** The data events of an SSE body: the chunks, and whether it ended with [DONE]. */
async function sse(res: Response) {
  const text = await res.text();
  const data = [...text.matchAll(/^data: (.*)$/gm)].map((m) => m[1] as string);
  return {
    done: data.at(-1) === "[DONE]",
    chunks: data.filter((d) => d !== "[DONE]").map((d) => JSON.parse(d) as Chunk),
  };
}
const contentOf = (chunks: Chunk[]) => chunks.map((c) => c.choices[0]?.delta.content ?? "").join("");
const toolResults = (messages: readonly Message[]) =>
  messages.flatMap((m) => (m.role === "tool" ? [[m.toolCallId, m.content, m.isError]] : []));

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
    const bare = await listen({ agents: { notes: notesAgent([readAndWrite]).agent } });
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

describe("X-Agentloop-Session", () => {
  it("continues a stored conversation: the session's history, the request's system messages and last user message", async () => {
    const store = memoryStore();
    const model = scriptedModel((request) => ({ text: `seen ${request.messages.length}` }));
    const agent = new Agent({ model });
    const { client, baseURL } = await listen({ agents: { chat: agent }, store });
    const inSession = (id: string) => ({ headers: { "X-Agentloop-Session": id } });
    const ask = async (messages: OpenAI.Chat.Completions.ChatCompletionMessageParam[], session = "chat-1") =>
      (await client.chat.completions.create({ model: "chat", messages }, inSession(session))) as Completion;

    const first = await ask([
      { role: "system", content: "Be brief." },
      { role: "user", content: "one" },
    ]);
    expect(first.choices[0]?.message.content).toBe("seen 1");
    expect(first.agentloop).toMatchObject({ sessionId: "chat-1", runId: first.id });
    expect(model.requests[0]?.system).toContain("Be brief.");
    // The client sends only the new message...
    const second = await ask([{ role: "user", content: "two" }]);
    expect(second.choices[0]?.message.content).toBe("seen 3");
    // ...or the whole conversation: the stored one counts, the rest is ignored.
    const third = await ask([
      { role: "user", content: "one" },
      { role: "assistant", content: "seen 1" },
      { role: "user", content: "two" },
      { role: "assistant", content: "seen 3" },
      { role: "user", content: "three" },
    ]);
    expect(third.choices[0]?.message.content).toBe("seen 5");
    expect(model.requests[2]?.messages.map((m) => m.content)).toEqual([
      "one",
      "seen 1",
      "two",
      "seen 3",
      "three",
    ]);
    expect((await store.read("chat-1"))?.messages).toHaveLength(6);
    for (const { id } of [first, second, third]) expect(await store.sessionOfRun(id)).toBe("chat-1");
    expect(await (await fetch(`${baseURL}/runs/${first.id}`)).json()).toEqual({
      id: first.id,
      object: "agentloop.run",
      sessionId: "chat-1",
      status: "superseded",
      latestRunId: third.id,
    });

    // A session with no messages yet starts from the request's conversation.
    const moved = await ask(
      [
        { role: "user", content: "a" },
        { role: "assistant", content: "b" },
        { role: "user", content: "c" },
      ],
      "chat-2",
    );
    expect(moved.choices[0]?.message.content).toBe("seen 3");
    expect((await store.read("chat-2"))?.messages).toHaveLength(4);

    const invalid = await post(
      `${baseURL}/chat/completions`,
      { messages: [{ role: "user", content: "x" }] },
      {
        "x-agentloop-session": "no spaces/allowed",
      },
    );
    expect(invalid.status).toBe(400);
    const error = await errorOf(invalid);
    expect(error).toMatchObject({ code: "invalid_session_id", param: "x-agentloop-session" });
    expect(error.message).toContain("A-Z a-z 0-9 . _ -");
  });

  it("refuses a session that another request holds (409), and its run's approvals and resume while it runs", async () => {
    const store = memoryStore();
    let open: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    const wait = defineTool({
      name: "wait",
      description: "Waits for the test.",
      parameters: z.object({}),
      execute: async () => {
        await gate;
        return "done";
      },
    });
    const model = scriptedModel((request) =>
      request.messages.at(-1)?.role === "tool"
        ? { text: "Finished." }
        : { toolCalls: [{ id: "t1", name: "wait", arguments: {} }] },
    );
    const { baseURL } = await listen({ agents: { slow: new Agent({ model, tools: [wait] }) }, store });
    const session = { "x-agentloop-session": "busy-1" };
    const body = { messages: [{ role: "user", content: "go" }], stream: true };
    const first = await post(`${baseURL}/chat/completions`, body, session);
    const reader = first.body?.getReader() as ReadableStreamDefaultReader<Uint8Array>;
    let seen = "";
    while (!seen.includes('"tool_call"')) seen += new TextDecoder().decode((await reader.read()).value);
    const runId = /"id":"(chatcmpl-[^"]+)"/.exec(seen)?.[1] as string;

    const second = await post(
      `${baseURL}/chat/completions`,
      { messages: [{ role: "user", content: "hi" }] },
      session,
    );
    expect(second.status).toBe(409);
    expect(second.headers.get("x-should-retry")).toBe("false");
    expect(await errorOf(second)).toMatchObject({
      type: "conflict_error",
      code: "session_busy",
      message: "Session 'busy-1' is in use by another request: wait for its answer, or use another session.",
    });
    const resume = await post(`${baseURL}/runs/${runId}/resume`, {});
    expect(resume.status).toBe(409);
    expect((await errorOf(resume)).message).toContain(`Run ${runId} is not interrupted`);
    expect((await post(`${baseURL}/runs/${runId}/approvals`, { approve: "all" })).status).toBe(409);
    expect(await (await fetch(`${baseURL}/runs/${runId}`)).json()).toMatchObject({ status: "running" });

    open();
    while (!(await reader.read()).done);
    const after = await post(
      `${baseURL}/chat/completions`,
      { messages: [{ role: "user", content: "hi" }] },
      session,
    );
    expect(after.status).toBe(200);
  });
});

describe("an interrupted run", () => {
  /** Leaves run `crashed-run` in session `crashed` as a process killed mid-tool would: `fast` done, `slow` in flight. */
  async function crash(store: SessionStore) {
    const never = defineTool({
      name: "slow",
      description: "Never answers.",
      parameters: z.object({}),
      execute: () => new Promise(() => {}),
    });
    const fast = defineTool({
      name: "fast",
      description: "Answers.",
      parameters: z.object({}),
      execute: () => "fast result",
    });
    const calls = {
      toolCalls: [
        { id: "s1", name: "slow", arguments: {} },
        { id: "f1", name: "fast", arguments: {} },
      ],
    };
    const session = await Session.open(store, "crashed");
    const agent = new Agent({ model: scriptedModel([calls]), tools: [never, fast] });
    const run = agent.stream("go", {
      runId: "crashed-run",
      sessionId: "crashed",
      history: session.messages,
      checkpoint: session.checkpoint,
    });
    // Pulled until the fast result is stored, then dropped: no abort, no last checkpoint.
    for (
      let next = await run.next();
      !next.done && next.value.type !== "tool_result";
      next = await run.next()
    );
    await session.release();
  }

  it("is resumed by POST /v1/runs/{id}/resume: the finished call is not run again, the model not asked again", async () => {
    const store = memoryStore();
    await crash(store);
    const ran: string[] = [];
    const tool = (name: string) =>
      defineTool({
        name,
        description: name,
        parameters: z.object({}),
        execute: () => {
          ran.push(name);
          return `${name} result`;
        },
      });
    const model = scriptedModel([{ text: "Recovered." }]);
    const { baseURL } = await listen({
      agents: { a: new Agent({ model, tools: [tool("slow"), tool("fast")] }) },
      store,
    });

    expect(await (await fetch(`${baseURL}/runs/crashed-run`)).json()).toMatchObject({
      status: "interrupted",
      sessionId: "crashed",
    });
    // A new message on the session is refused: the interrupted run comes first.
    const talk = await post(
      `${baseURL}/chat/completions`,
      { messages: [{ role: "user", content: "hi" }] },
      {
        "x-agentloop-session": "crashed",
      },
    );
    expect(talk.status).toBe(409);
    expect(await errorOf(talk)).toMatchObject({
      code: "run_interrupted",
      message:
        "Session 'crashed' has an interrupted run (crashed-run): continue it with POST /v1/runs/crashed-run/resume before sending a new message.",
    });

    const res = await post(`${baseURL}/runs/crashed-run/resume`, { stream: true });
    const { chunks, done } = await sse(res);
    expect(done).toBe(true);
    expect(new Set(chunks.map((c) => c.id))).toEqual(new Set(["crashed-run"]));
    expect(contentOf(chunks)).toBe("Recovered.");
    expect(chunks.at(-1)?.agentloop).toMatchObject({ stopReason: "final_answer", runId: "crashed-run" });
    expect(ran).toEqual(["slow"]);
    expect(model.requests).toHaveLength(1);
    expect(toolResults(model.requests[0]?.messages ?? [])).toEqual([
      ["s1", "slow result", false],
      ["f1", "fast result", false],
    ]);
    const again = await post(`${baseURL}/runs/crashed-run/resume`, "");
    expect(again.status).toBe(409);
    expect((await errorOf(again)).message).toBe(
      "Run crashed-run was not interrupted: it has completed (final_answer).",
    );
  });
});

describe("a stored run this version cannot read", () => {
  it("is a 500 naming the problem, every time: the session is not left held", async () => {
    const store = memoryStore();
    const handle = await store.acquire("future");
    await handle.checkpoint({ run: { runId: "future-run", status: "completed", state: { version: 99 } } });
    await handle.release();
    const { baseURL } = await listen({ agents: { a: new Agent({ model: scriptedModel([]) }) }, store });
    for (let i = 0; i < 2; i++) {
      const res = await post(
        `${baseURL}/chat/completions`,
        { messages: [{ role: "user", content: "hi" }] },
        {
          "x-agentloop-session": "future",
        },
      );
      expect(res.status).toBe(500);
      expect(await errorOf(res)).toMatchObject({
        code: "invalid_state",
        message: "This run state has version 99; this agentloop continues version 1.",
      });
    }
    expect((await store.list())[0]).toMatchObject({ id: "future", status: "completed" });
  });
});
