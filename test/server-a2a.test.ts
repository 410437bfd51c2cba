import { createHash } from "node:crypto";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Message as A2AMessage, type Part, Role, type Task, TaskState } from "@a2a-js/sdk";
import { type Client, ClientFactory } from "@a2a-js/sdk/client";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { Agent, defineTool } from "../src/index.js";
import { openAIChatModel } from "../src/models/openai.js";
import type { ServerOptions } from "../src/server/index.js";
import { memoryStore, postgresStore } from "../src/store/index.js";
import { type FakeOpenAIServer, type FakeResponse, startFakeOpenAIServer } from "../src/testing/index.js";
import { listen } from "./support/listen.js";
import { type Postgres, skipReason as pgSkip, startPostgres } from "./support/postgres.js";
import { startServe } from "./support/serve-process.js";

let upstream: FakeOpenAIServer | undefined;
afterEach(async () => {
  await upstream?.close();
  upstream = undefined;
});

/** A model answering from the fake OpenAI server, its replies in order. */
async function fakeModel(replies: FakeResponse[]) {
  upstream = await startFakeOpenAIServer({ respond: replies });
  return openAIChatModel({ model: "gpt-4o-mini", baseURL: upstream.url, apiKey: "sk-fake", maxRetries: 0 });
}

/** `write_note` needs approval; `wait` runs until its run is aborted. `ran` records what ran. */
function tools() {
  const ran: string[] = [];
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
  const wait = defineTool({
    name: "wait",
    description: "Waits for a long time.",
    parameters: z.object({}),
    execute: (_args, { signal }) =>
      new Promise((_resolve, reject) => {
        ran.push("wait started");
        signal.addEventListener("abort", () => {
          ran.push("wait aborted");
          reject(new Error("aborted"));
        });
      }),
  });
  return { ran, tools: [write, wait] };
}

/** The official client, from the agent card of the app served on a free port. */
async function a2aClient(options: ServerOptions, key?: string): Promise<{ client: Client; url: string }> {
  const { port } = await listen(options);
  const url = `http://127.0.0.1:${port}`;
  return { client: await clientAt(url, key), url };
}

async function clientAt(url: string, key?: string): Promise<Client> {
  const factory = new ClientFactory();
  const client = await factory.createFromUrl(url);
  if (key === undefined) return client;
  // Every call carries the key (the card is public).
  return new Proxy(client, {
    get(target, name, receiver) {
      const value = Reflect.get(target, name, receiver);
      if (typeof value !== "function") return value;
      return (params: unknown, options: { serviceParameters?: Record<string, string> } = {}) =>
        value.call(target, params, {
          ...options,
          serviceParameters: { ...options.serviceParameters, authorization: `Bearer ${key}` },
        });
    },
  });
}

const text = (value: string): Part => ({
  content: { $case: "text", value },
  mediaType: "text/plain",
  filename: "",
  metadata: {},
});

function message(parts: Part[], taskId = "", contextId = ""): A2AMessage {
  return {
    messageId: crypto.randomUUID(),
    contextId,
    taskId,
    role: Role.ROLE_USER,
    parts,
    metadata: {},
    extensions: [],
    referenceTaskIds: [],
  };
}

async function send(client: Client, parts: Part[], taskId = "", contextId = ""): Promise<Task> {
  const result = await client.sendMessage({
    tenant: "",
    message: message(parts, taskId, contextId),
    configuration: undefined,
    metadata: {},
  });
  expect("id" in result && "status" in result, "a task").toBe(true);
  return result as Task;
}

const textOf = (parts: readonly Part[] | undefined) =>
  (parts ?? []).map((p) => (p.content?.$case === "text" ? p.content.value : "")).join("");
const answerOf = (task: Task) => textOf(task.artifacts.find((a) => a.artifactId === "answer")?.parts);

describe("A2A", () => {
  it("serves a public card with every required field, and SendMessage completes a task with the answer", async () => {
    const model = await fakeModel([{ text: "Paris." }]);
    const agent = new Agent({ model, instructions: "You answer geography questions." });
    const { client, url } = await a2aClient({ agents: { geo: agent } });
    const card = (await (await fetch(`${url}/.well-known/agent-card.json`)).json()) as Record<
      string,
      unknown
    >;
    expect(card).toMatchObject({
      name: "geo",
      description: "You answer geography questions.",
      version: expect.any(String),
      supportedInterfaces: [{ url: `${url}/a2a`, protocolBinding: "JSONRPC", protocolVersion: "1.0" }],
      capabilities: { streaming: true },
      defaultInputModes: expect.arrayContaining(["text/plain"]),
      defaultOutputModes: expect.arrayContaining(["text/plain"]),
      skills: [expect.objectContaining({ id: "run", name: "geo" })],
    });
    // No key: no security declared.
    expect(card.securitySchemes ?? {}).toEqual({});

    const task = await send(client, [text("Capital of France?")]);
    expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(answerOf(task)).toBe("Paris.");
    expect(upstream?.requests[0]?.body?.messages).toContainEqual({
      role: "user",
      content: "Capital of France?",
    });
    const fetched = await client.getTask({ tenant: "", id: task.id, historyLength: undefined });
    expect(fetched.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(answerOf(fetched)).toBe("Paris.");
    expect(fetched.contextId).toBe(task.contextId);
  });

  it("streams a task: working, tool calls as status messages with data parts, text deltas as artifact updates, completed", async () => {
    const model = await fakeModel([
      { toolCalls: [{ id: "c1", name: "calculator", arguments: { expression: "6*7" } }] },
      { text: "It is 42." },
    ]);
    const calculator = defineTool({
      name: "calculator",
      description: "Computes.",
      parameters: z.object({ expression: z.string() }),
      execute: () => "42",
    });
    const { client } = await a2aClient({ agents: { calc: new Agent({ model, tools: [calculator] }) } });
    const events: string[] = [];
    let answer = "";
    let final: TaskState | undefined;
    for await (const event of client.sendMessageStream({
      tenant: "",
      message: message([text("6*7?")]),
      configuration: undefined,
      metadata: {},
    })) {
      const payload = event.payload;
      if (payload?.$case === "task") events.push(`task ${TaskState[payload.value.status?.state ?? 0]}`);
      if (payload?.$case === "artifactUpdate") {
        const { artifact, append } = payload.value;
        answer = (append ? answer : "") + textOf(artifact?.parts);
        events.push("artifact");
      }
      if (payload?.$case === "statusUpdate") {
        const { status } = payload.value;
        final = status?.state;
        const data = status?.message?.parts.find((p) => p.content?.$case === "data")?.content;
        events.push(`status ${TaskState[status?.state ?? 0]}${data ? ` ${JSON.stringify(data.value)}` : ""}`);
      }
    }
    expect(events[0]).toBe("task TASK_STATE_WORKING");
    expect(events).toContain(
      'status TASK_STATE_WORKING {"toolCall":{"id":"c1","name":"calculator","arguments":{"expression":"6*7"}}}',
    );
    expect(events).toContain(
      'status TASK_STATE_WORKING {"toolResult":{"id":"c1","name":"calculator","isError":false,"content":"42"}}',
    );
    expect(events).toContain("artifact");
    expect(events.at(-1)).toBe("status TASK_STATE_COMPLETED");
    expect(final).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(answer).toBe("It is 42.");
  });

  it("a task goes on when its stream's client leaves; GetTask reads its end", async () => {
    const model = await fakeModel([
      { toolCalls: [{ id: "g1", name: "gate", arguments: {} }] },
      { text: "Done." },
    ]);
    let open: () => void = () => {};
    const opened = new Promise<void>((resolve) => {
      open = resolve;
    });
    const gate = defineTool({
      name: "gate",
      description: "Waits.",
      parameters: z.object({}),
      execute: () => opened.then(() => "open"),
    });
    const { client } = await a2aClient({ agents: { a: new Agent({ model, tools: [gate] }) } });
    let taskId = "";
    for await (const event of client.sendMessageStream({
      tenant: "",
      message: message([text("Go")]),
      configuration: undefined,
      metadata: {},
    })) {
      if (event.payload?.$case === "task") taskId = event.payload.value.id;
      break; // the client leaves
    }
    open();
    let task = await client.getTask({ tenant: "", id: taskId, historyLength: undefined });
    while (task.status?.state === TaskState.TASK_STATE_WORKING) {
      await new Promise((resolve) => setTimeout(resolve, 5));
      task = await client.getTask({ tenant: "", id: taskId, historyLength: undefined });
    }
    expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(answerOf(task)).toBe("Done.");
  });

  it("an approval makes the task input-required; `approve` continues it, and a data part decides by call id", async () => {
    const model = await fakeModel([
      { text: "Saving.", toolCalls: [{ id: "w1", name: "write_note", arguments: { text: "hi" } }] },
      { text: "Saved." },
      {
        toolCalls: [
          { id: "w2", name: "write_note", arguments: { text: "a" } },
          { id: "w3", name: "write_note", arguments: { text: "b" } },
        ],
      },
      { text: "Saved a, not b." },
    ]);
    const { ran, tools: list } = tools();
    const { client } = await a2aClient({
      agents: { notes: new Agent({ model, tools: list }) },
      store: memoryStore(),
    });

    const waiting = await send(client, [text("Save hi")]);
    expect(waiting.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    const asked = waiting.status?.message?.parts ?? [];
    expect(textOf(asked)).toContain('write_note({"text":"hi"}) [w1]');
    expect(asked.find((p) => p.content?.$case === "data")?.content?.value).toEqual({
      pendingApprovals: [{ id: "w1", name: "write_note", arguments: { text: "hi" } }],
    });
    expect(ran).toEqual([]);
    // The context is taken while its task waits: a new task in it is rejected, saying why.
    const another = await send(client, [text("Something else")], "", waiting.contextId);
    expect(another.status?.state).toBe(TaskState.TASK_STATE_REJECTED);
    expect(textOf(another.status?.message?.parts)).toContain(`task ${waiting.id} in it waits for input`);
    // Something else than a decision: the task goes on waiting, told how to decide.
    const unclear = await send(client, [text("maybe later")], waiting.id);
    expect(unclear.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    expect(textOf(unclear.status?.message?.parts)).toContain('Reply "approve" or "deny"');

    const done = await send(client, [text("approve")], waiting.id);
    expect(done.id).toBe(waiting.id);
    expect(done.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(answerOf(done)).toBe("Saved.");
    expect(ran).toEqual(["write hi"]);

    // A second task in the same context (the same conversation), decided by a data part.
    const second = await send(client, [text("Save a and b")], "", waiting.contextId);
    expect(second.contextId).toBe(waiting.contextId);
    expect(second.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    const data: Part = {
      content: { $case: "data", value: { approve: ["w2"], deny: ["w3"] } },
      mediaType: "application/json",
      filename: "",
      metadata: {},
    };
    const decided = await send(client, [data], second.id);
    expect(decided.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(answerOf(decided)).toBe("Saved a, not b.");
    expect(ran).toEqual(["write hi", "write a"]);
    // The model saw the first task's conversation in the second's request.
    expect(JSON.stringify(upstream?.requests[2]?.body?.messages)).toContain("Save hi");
  });

  it("a question makes the task input-required with the question; the next message is the answer", async () => {
    const model = await fakeModel([
      { toolCalls: [{ id: "q1", name: "ask_question", arguments: { question: "Which city?" } }] },
      { toolCalls: [{ id: "t1", name: "task_completion", arguments: { result: "Booked Lyon." } }] },
    ]);
    const { client } = await a2aClient({ agents: { travel: new Agent({ model, mode: "explicit" }) } });
    const asked = await send(client, [text("Book a trip")]);
    expect(asked.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    expect(textOf(asked.status?.message?.parts)).toBe("Which city?");
    const done = await send(client, [text("Lyon")], asked.id);
    expect(done.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(answerOf(done)).toBe("Booked Lyon.");
    expect(upstream?.requests[1]?.body?.messages).toContainEqual(
      expect.objectContaining({ role: "tool", tool_call_id: "q1", content: "Lyon" }),
    );
    // Read back from the stored run: the input and the answer, the user's.
    const stored = await client.getTask({ tenant: "", id: asked.id, historyLength: undefined });
    expect(stored.history.map((m) => [m.role, textOf(m.parts)])).toEqual([
      [Role.ROLE_USER, "Book a trip"],
      [Role.ROLE_USER, "Lyon"],
    ]);
    expect(answerOf(stored)).toBe("Booked Lyon.");
  });

  it("CancelTask aborts a long tool call, and cancels a task waiting for approval", async () => {
    const model = await fakeModel([
      { toolCalls: [{ id: "l1", name: "wait", arguments: {} }] },
      { toolCalls: [{ id: "w1", name: "write_note", arguments: { text: "hi" } }] },
    ]);
    const { ran, tools: list } = tools();
    const { client } = await a2aClient({ agents: { notes: new Agent({ model, tools: list }) } });
    const stream = client.sendMessageStream({
      tenant: "",
      message: message([text("Wait")]),
      configuration: undefined,
      metadata: {},
    });
    let taskId = "";
    let last: TaskState | undefined;
    for await (const event of stream) {
      const payload = event.payload;
      if (payload?.$case === "task") taskId = payload.value.id;
      if (payload?.$case === "statusUpdate") {
        last = payload.value.status?.state;
        const data = payload.value.status?.message?.parts.find((p) => p.content?.$case === "data");
        // The long call has started: cancel the task.
        if (data && JSON.stringify(data.content?.value).includes("toolCall")) {
          // A message on a working task is refused.
          await expect(send(client, [text("hurry")], taskId)).rejects.toThrow(/is working/);
          const cancelled = await client.cancelTask({ tenant: "", id: taskId, metadata: {} });
          expect(cancelled.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
        }
      }
    }
    expect(last).toBe(TaskState.TASK_STATE_CANCELED);
    expect(ran).toEqual(["wait started", "wait aborted"]);
    expect((await client.getTask({ tenant: "", id: taskId, historyLength: undefined })).status?.state).toBe(
      TaskState.TASK_STATE_CANCELED,
    );
    // A cancelled task is not continued.
    await expect(send(client, [text("go on")], taskId)).rejects.toThrow(/terminal state/);

    const waiting = await send(client, [text("Save hi")]);
    expect(waiting.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    const cancelled = await client.cancelTask({ tenant: "", id: waiting.id, metadata: {} });
    expect(cancelled.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
    expect(
      (await client.getTask({ tenant: "", id: waiting.id, historyLength: undefined })).status?.state,
    ).toBe(TaskState.TASK_STATE_CANCELED);
    expect(ran).not.toContain("write hi");
  });

  it("a stream sends keep-alive comments while a tool runs, and the official client reads through them", async () => {
    const model = await fakeModel([{ toolCalls: [{ id: "l1", name: "wait", arguments: {} }] }]);
    const { tools: list } = tools();
    const { client, url } = await a2aClient({
      agents: { a: new Agent({ model, tools: list }) },
      keepAliveMs: 1,
    });
    const response = await fetch(`${url}/a2a`, {
      method: "POST",
      headers: { "content-type": "application/json", "a2a-version": "1.0", accept: "text/event-stream" },
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 7,
        method: "SendStreamingMessage",
        params: { message: { messageId: "m", role: "ROLE_USER", parts: [{ text: "Wait" }] } },
      }),
    });
    expect(response.headers.get("content-type")).toBe("text/event-stream");
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    const decoder = new TextDecoder();
    const read = async () => {
      const chunk = await reader.read();
      return { done: chunk.done, text: decoder.decode(chunk.value, { stream: true }) };
    };
    let raw = "";
    while (!raw.includes(": keep-alive\n\n")) raw += (await read()).text;
    const taskId = /"task":\{"id":"([^"]+)"/.exec(raw)?.[1] as string;
    await client.cancelTask({ tenant: "", id: taskId, metadata: {} });
    for (let chunk = await read(); !chunk.done; chunk = await read()) raw += chunk.text;
    expect(raw).toContain('"state":"TASK_STATE_CANCELED"');
  });

  it("answers bad JSON-RPC with the protocol's errors, never a stack trace, and keeps serving", async () => {
    const model = await fakeModel([{ text: "Still here." }]);
    const { client, url } = await a2aClient({ agents: { a: new Agent({ model }) }, maxBodyBytes: 64 * 1024 });
    const rpc = async (body: string, headers: Record<string, string> = {}) => {
      const response = await fetch(`${url}/a2a`, {
        method: "POST",
        headers: { "content-type": "application/json", "a2a-version": "1.0", ...headers },
        body,
      });
      return {
        status: response.status,
        body: (await response.json()) as { error?: { code: number; message: string } },
      };
    };
    const cases: [string, number, RegExp][] = [
      ["{not json", -32700, /not JSON/],
      ['{"jsonrpc":"2.0","id":1}', -32602, /Invalid JSON-RPC/],
      ['{"jsonrpc":"2.0","id":1,"method":"tasks/send","params":{}}', -32601, /method/i],
      ['{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"nope"}}', -32001, /not found/i],
      [
        '{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"url":"http://x/a.png"}]}}}',
        -32602,
        /file/,
      ],
      [
        '{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","contextId":"a b","parts":[{"text":"hi"}]}}}',
        -32602,
        /contextId/,
      ],
      ['{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}', -32004, /ListTasks/],
    ];
    for (const [body, code, message] of cases) {
      const answer = await rpc(body);
      expect(answer.status, body).toBe(200);
      expect(answer.body.error?.code, body).toBe(code);
      expect(answer.body.error?.message, body).toMatch(message);
      expect(answer.body.error?.message, body).not.toMatch(/\n\s+at /);
    }
    expect(
      (await rpc('{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}}', { "a2a-version": "0.3" }))
        .body.error?.message,
    ).toMatch(/A2A-Version: 1\.0/);
    const huge = `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"${"a".repeat(100_000)}"}]}}}`;
    const tooLarge = await rpc(huge);
    expect(tooLarge.status).toBe(413);
    expect(tooLarge.body.error).toEqual({
      code: -32600,
      message: "Request body too large: at most 65536 bytes.",
    });
    const plain = await fetch(`${url}/a2a`, {
      method: "POST",
      headers: { "content-type": "text/plain" },
      body: "{}",
    });
    expect(((await plain.json()) as { error: { message: string } }).error.message).toMatch(
      /application\/json/,
    );
    expect(answerOf(await send(client, [text("Hello?")]))).toBe("Still here.");
  });
});

describe("A2A with per-client keys", () => {
  it("a task is its client's: another client's key does not find it, nor cancel or continue it", async () => {
    const model = await fakeModel([
      { toolCalls: [{ id: "w1", name: "write_note", arguments: { text: "hi" } }] },
    ]);
    const sha256 = (key: string) => createHash("sha256").update(key).digest("hex");
    const keys = [
      { name: "alice", sha256: sha256("alice-key") },
      { name: "bob", sha256: sha256("bob-key") },
    ];
    const { port } = await listen({
      agents: { notes: new Agent({ model, tools: tools().tools }) },
      keys,
      store: memoryStore(),
    });
    const url = `http://127.0.0.1:${port}`;
    const alice = await clientAt(url, "alice-key");
    const bob = await clientAt(url, "bob-key");
    const waiting = await send(alice, [text("Save hi")]);
    expect(waiting.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    await expect(bob.getTask({ tenant: "", id: waiting.id, historyLength: undefined })).rejects.toThrow(
      /not found/i,
    );
    await expect(bob.cancelTask({ tenant: "", id: waiting.id, metadata: {} })).rejects.toThrow(/not found/i);
    await expect(send(bob, [text("approve")], waiting.id)).rejects.toThrow(/not found/i);
    expect(
      (await alice.getTask({ tenant: "", id: waiting.id, historyLength: undefined })).status?.state,
    ).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
  });
});

describe.skipIf(pgSkip !== undefined)(
  `A2A replicas on one PostgreSQL ${pgSkip ? `(skipped: ${pgSkip})` : ""}`,
  () => {
    let pg: Postgres | undefined;
    beforeAll(async () => {
      pg = await startPostgres();
    }, 60_000);
    afterAll(() => pg?.stop());

    it("a task waiting on one replica is read, approved and completed on another", async () => {
      const model = await fakeModel([
        { toolCalls: [{ id: "w1", name: "write_note", arguments: { text: "hi" } }] },
        { text: "Saved." },
      ]);
      const url = await (pg as Postgres).database();
      const [storeA, storeB] = [await postgresStore(url), await postgresStore(url)];
      try {
        const { ran, tools: list } = tools();
        const agent = new Agent({ model, tools: list });
        const a = await a2aClient({ agents: { notes: agent }, store: storeA });
        const b = await a2aClient({ agents: { notes: agent }, store: storeB });
        const waiting = await send(a.client, [text("Save hi")]);
        expect(waiting.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
        const seen = await b.client.getTask({ tenant: "", id: waiting.id, historyLength: undefined });
        expect(seen.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
        const done = await send(b.client, [text("yes")], waiting.id);
        expect(answerOf(done)).toBe("Saved.");
        expect(ran).toEqual(["write hi"]);
        const onA = await a.client.getTask({ tenant: "", id: waiting.id, historyLength: undefined });
        expect(onA.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
        expect(answerOf(onA)).toBe("Saved.");
      } finally {
        await storeA.close();
        await storeB.close();
      }
    });
  },
);

describe("A2A from agentloop serve", () => {
  it("declares the Bearer scheme and refuses calls without the key (401)", async () => {
    upstream = await startFakeOpenAIServer({ respond: [{ text: "Hi." }] });
    const serve = startServe(
      { OPENAI_BASE_URL: upstream.url, OPENAI_API_KEY: "sk-fake", AGENTLOOP_API_KEY: "local-key" },
      ["--no-store"],
    );
    const url = await serve.url();
    const card = (await (await fetch(`${url}/.well-known/agent-card.json`)).json()) as Record<
      string,
      unknown
    >;
    expect(card.securitySchemes).toEqual({
      bearer: { httpAuthSecurityScheme: expect.objectContaining({ scheme: "Bearer" }) },
    });
    // Proto JSON leaves the empty scope list out.
    expect(card.securityRequirements).toEqual([{ schemes: { bearer: {} } }]);
    const anonymous = await clientAt(url);
    await expect(send(anonymous, [text("Hi")])).rejects.toThrow(/401/);
    const client = await clientAt(url, "local-key");
    expect(answerOf(await send(client, [text("Hi")]))).toBe("Hi.");
  });

  it("a task survives a restart with a SQLite store", async () => {
    upstream = await startFakeOpenAIServer({
      respond: [{ toolCalls: [{ id: "q1", name: "ask_question", arguments: { question: "Which city?" } }] }],
    });
    const cwd = mkdtempSync(join(tmpdir(), "agentloop-a2a-"));
    const env = { OPENAI_BASE_URL: upstream.url, OPENAI_API_KEY: "sk-fake", AGENTLOOP_DB: join(cwd, "a.db") };
    const first = startServe(env, ["--mode", "explicit"], cwd);
    const asked = await send(await clientAt(await first.url()), [text("Book a trip")]);
    expect(asked.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    first.child.kill("SIGTERM");
    await first.exited;
    const second = startServe(env, ["--mode", "explicit"], cwd);
    const task = await (await clientAt(await second.url())).getTask({
      tenant: "",
      id: asked.id,
      historyLength: undefined,
    });
    expect(task.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    expect(textOf(task.status?.message?.parts)).toBe("Which city?");
    expect(task.contextId).toBe(asked.contextId);
    expect(textOf(task.history[0]?.parts)).toBe("Book a trip");
  });
});
