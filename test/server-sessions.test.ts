import type OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { Session } from "../src/agent/session.js";
import { Agent, defineTool } from "../src/index.js";
import { memoryStore, type SessionStore } from "../src/store/index.js";
import { scriptedModel } from "../src/testing/index.js";
import { type Completion, contentOf, errorOf, post, sse, toolResults } from "./support/http.js";
import { listen } from "./support/listen.js";

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
