// One key per client (issue 22): runs and sessions belong to the key that created them; another
// client's are not found, exactly as a missing one; session names are per client; the owner
// survives a restart (SQLite through the CLI, PostgreSQL in process).
import { createHash } from "node:crypto";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { Agent, defineTool, type Message } from "../src/index.js";
import { type ClientKey, createApp } from "../src/server/index.js";
import { memoryStore, postgresStore, type SessionStore, sqliteStore } from "../src/store/index.js";
import { type FakeOpenAIServer, startFakeOpenAIServer } from "../src/testing/fake-openai-server.js";
import { type ScriptedStep, scriptedModel } from "../src/testing/index.js";
import { runCli } from "./helpers.js";
import { type Completion, errorOf } from "./support/http.js";
import { listen } from "./support/listen.js";
import { type Postgres, skipReason, startPostgres } from "./support/postgres.js";
import { startServe } from "./support/serve-process.js";

const ALICE = "alice-key-0123456789";
const BOB = "bob-key-9876543210";
const SHARED = "shared-server-key";
const sha256 = (key: string) => createHash("sha256").update(key).digest("hex");
const KEYS: ClientKey[] = [
  { name: "alice", sha256: sha256(ALICE) },
  { name: "bob", sha256: sha256(BOB).toUpperCase() },
];

/** `write_note` needs approval; the model asks for it once, then answers with what it heard. */
function notesAgent() {
  const write = defineTool({
    name: "write_note",
    description: "Writes the note.",
    parameters: z.object({ text: z.string() }),
    needsApproval: true,
    execute: ({ text }) => `saved ${text}`,
  });
  const heard = (messages: readonly Message[]) =>
    messages
      .filter((m) => m.role === "user")
      .map((m) => m.content)
      .join(" | ");
  const model = scriptedModel((request): ScriptedStep => {
    const last = request.messages.at(-1);
    if (last?.role === "user" && String(last.content).startsWith("save"))
      return { text: "Saving.", toolCalls: [{ id: "w1", name: "write_note", arguments: { text: "hi" } }] };
    if (last?.role === "tool") return { text: "Saved." };
    return { text: `heard ${heard(request.messages)}` };
  });
  return new Agent({ model, tools: [write] });
}

const json = (key: string, extra: Record<string, string> = {}) => ({
  authorization: `Bearer ${key}`,
  "content-type": "application/json",
  ...extra,
});

/** A 404 body with the run id taken out, to compare another client's run with a missing one. */
async function notFound(res: Response, id: string) {
  expect(res.status).toBe(404);
  const error = await errorOf(res);
  return { ...error, message: error.message.replaceAll(id, "<id>") };
}

const stores: [string, () => Promise<SessionStore>][] = [
  ["memory", async () => memoryStore()],
  ["SQLite", () => sqliteStore(join(mkdtempSync(join(tmpdir(), "agentloop-owners-")), "a.db"))],
];

describe.each(stores)("one key per client on the %s store", (_name, open) => {
  it("a client's runs are its own: another gets 404 for GET, approvals, resume and previous_response_id, exactly as for a missing run", async () => {
    const store = await open();
    const { baseURL } = await listen({ agents: { notes: notesAgent() }, store, keys: KEYS });
    const alice = new OpenAI({ baseURL, apiKey: ALICE, maxRetries: 0 });
    const bob = new OpenAI({ baseURL, apiKey: BOB, maxRetries: 0 });
    const waiting = (await alice.chat.completions.create({
      model: "notes",
      messages: [{ role: "user", content: "save hi" }],
    })) as Completion;
    const runId = waiting.id;
    // The client's own ids, never the stored one.
    expect(waiting.agentloop).toMatchObject({ stopReason: "approval_required", runId, sessionId: runId });

    const missing = "chatcmpl-00000000-0000-0000-0000-000000000000";
    for (const [key, id, status] of [
      [BOB, runId, 404],
      [BOB, missing, 404],
      [ALICE, missing, 404],
    ] as const) {
      const get = await fetch(`${baseURL}/runs/${id}`, { headers: json(key) });
      const approve = await fetch(`${baseURL}/runs/${id}/approvals`, {
        method: "POST",
        headers: json(key),
        body: JSON.stringify({ approve: "all" }),
      });
      const resume = await fetch(`${baseURL}/runs/${id}/resume`, { method: "POST", headers: json(key) });
      for (const res of [get, approve, resume]) expect(res.status).toBe(status);
      expect(await notFound(get, id)).toMatchObject({ code: "run_not_found" });
    }
    // Bob is told exactly what he would be told of a run that does not exist.
    const theirs = await fetch(`${baseURL}/runs/${runId}`, { headers: json(BOB) });
    const nobodys = await fetch(`${baseURL}/runs/${missing}`, { headers: json(BOB) });
    expect(await notFound(theirs, runId)).toEqual(await notFound(nobodys, missing));
    await expect(
      bob.responses.create({ model: "notes", input: "go on", previous_response_id: runId }),
    ).rejects.toMatchObject({ status: 404, code: "previous_response_not_found" });

    const view = await fetch(`${baseURL}/runs/${runId}`, { headers: json(ALICE) });
    expect(await view.json()).toMatchObject({ id: runId, sessionId: runId, status: "waiting" });
    const approved = await fetch(`${baseURL}/runs/${runId}/approvals`, {
      method: "POST",
      headers: json(ALICE),
      body: JSON.stringify({ approve: "all" }),
    });
    expect(approved.status).toBe(200);
    expect(((await approved.json()) as Completion).choices[0]?.message.content).toBe("Saved.");
    const next = await alice.responses.create({ model: "notes", input: "and?", previous_response_id: runId });
    expect(next.output_text).toBe("heard save hi | and?");
    await store.close();
  });

  it("session names are per client: alice's 'x' and bob's 'x' are two conversations; AGENTLOOP_API_KEY beside the keys is the client 'default'", async () => {
    const store = await open();
    const { baseURL } = await listen({
      agents: { notes: notesAgent() },
      store,
      keys: KEYS,
      apiKey: SHARED,
    });
    const say = async (key: string, content: string, session = "x") => {
      const res = await fetch(`${baseURL}/chat/completions`, {
        method: "POST",
        headers: json(key, { "x-agentloop-session": session }),
        body: JSON.stringify({ messages: [{ role: "user", content }] }),
      });
      expect(res.status).toBe(200);
      return (await res.json()) as Completion;
    };
    expect((await say(ALICE, "one")).choices[0]?.message.content).toBe("heard one");
    expect((await say(BOB, "two")).choices[0]?.message.content).toBe("heard two");
    expect((await say(SHARED, "three")).choices[0]?.message.content).toBe("heard three");
    const again = await say(ALICE, "four");
    expect(again.choices[0]?.message.content).toBe("heard one | four");
    expect(again.agentloop).toMatchObject({ sessionId: "x" });
    expect((await store.list()).map((s) => s.id).sort()).toEqual(
      expect.arrayContaining(["alice.x", "bob.x", "default.x"]),
    );
    // The owner's name counts against the 128 characters of a session id.
    const long = await fetch(`${baseURL}/chat/completions`, {
      method: "POST",
      headers: json(ALICE, { "x-agentloop-session": "y".repeat(128) }),
      body: JSON.stringify({ messages: [{ role: "user", content: "hi" }] }),
    });
    expect(long.status).toBe(400);
    expect((await errorOf(long)).message).toMatch(/too long for client 'alice': use at most 122 characters/);
    const wrong = await fetch(`${baseURL}/models`, { headers: json("nobody's key") });
    expect(wrong.status).toBe(401);
    expect((await errorOf(wrong)).message).toBe(
      "Invalid or missing API key: send Authorization: Bearer <your API key>.",
    );
    await store.close();
  });
});

describe("client keys, checked", () => {
  it("createApp refuses a bad entry, naming it", async () => {
    const agents = { notes: notesAgent() };
    const bad: [ClientKey[], RegExp][] = [
      [[{ name: "a.b", sha256: sha256(ALICE) }], /keys\[0\]\.name "a\.b" is not a client name/],
      [[{ name: "default", sha256: sha256(ALICE) }], /'default' is reserved/],
      [[{ name: "alice", sha256: ALICE }], /not a SHA-256 in hex.*sha256sum/],
      [[...KEYS, { name: "alice", sha256: sha256("x") }], /keys\[2\]\.name 'alice' is given twice/],
      [[...KEYS, { name: "carol", sha256: sha256(ALICE) }], /keys\[2\] \('carol'\) has the key of another/],
    ];
    for (const [keys, message] of bad) expect(() => createApp({ agents, keys })).toThrow(message);
  });
});

describe("agentloop serve with client keys", () => {
  let upstream: FakeOpenAIServer | undefined;
  afterEach(async () => {
    await upstream?.close();
    upstream = undefined;
  });

  it("keeps each run's owner across a restart (SQLite), and names a bad key entry of the config (exit 2)", async () => {
    upstream = await startFakeOpenAIServer({
      respond: (request) =>
        (request.body.messages as { role: string }[]).some((m) => m.role === "tool")
          ? { text: "It is 4." }
          : { toolCalls: [{ name: "calculator", arguments: { expression: "2+2" } }] },
    });
    const dir = mkdtempSync(join(tmpdir(), "agentloop-serve-keys-"));
    const config = join(dir, "agentloop.json");
    writeFileSync(
      config,
      JSON.stringify({ approval: { require: ["calculator"] }, serve: { keys: KEYS.slice(0, 2) } }),
    );
    const env = { OPENAI_BASE_URL: upstream.url, OPENAI_API_KEY: "sk-upstream" };
    const first = startServe(env, ["--config", config], dir);
    const url = await first.url();
    await first.waitFor(/2 client keys \(alice, bob\): each client sees only its own runs/);
    const alice = new OpenAI({ baseURL: `${url}/v1`, apiKey: ALICE, maxRetries: 0 });
    const waiting = (await alice.chat.completions.create({
      model: "gpt-4o-mini",
      messages: [{ role: "user", content: "2+2?" }],
    })) as Completion;
    expect(waiting.agentloop).toMatchObject({ stopReason: "approval_required" });
    first.child.kill("SIGTERM");
    expect(await first.exited).toBe(0);

    const second = startServe(env, ["--config", config], dir);
    const url2 = await second.url();
    const approve = (key: string) =>
      fetch(`${url2}/v1/runs/${waiting.id}/approvals`, {
        method: "POST",
        headers: json(key),
        body: JSON.stringify({ approve: "all" }),
      });
    expect((await approve(BOB)).status).toBe(404);
    const done = await approve(ALICE);
    expect(done.status).toBe(200);
    expect(((await done.json()) as Completion).choices[0]?.message.content).toBe("It is 4.");
    second.child.kill("SIGTERM");
    expect(await second.exited).toBe(0);
    for (const secret of [ALICE, BOB]) expect(second.stderr() + first.stderr()).not.toContain(secret);

    writeFileSync(config, JSON.stringify({ serve: { keys: [{ name: "carol", sha256: "abc" }] } }));
    const bad = await runCli(["serve", "--port", "0", "--config", config], { env, cwd: dir });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(
      /^agentloop: \S+agentloop\.json: serve\.keys\[0\]\.sha256 of 'carol' is not a SHA-256 in hex[^\n]*sha256sum\.\n$/,
    );
  });
});

describe.skipIf(skipReason !== undefined)(
  `client keys on PostgreSQL ${skipReason ? `(skipped: ${skipReason})` : ""}`,
  () => {
    let pg: Postgres;
    beforeAll(async () => {
      pg = await startPostgres();
    }, 60_000);
    afterAll(() => pg?.stop());

    it("a run's owner survives the server and its store being closed and opened again", async () => {
      const url = await pg.database();
      const first = await postgresStore(url);
      const a = await listen({ agents: { notes: notesAgent() }, store: first, keys: KEYS });
      const waiting = (await new OpenAI({
        baseURL: a.baseURL,
        apiKey: ALICE,
        maxRetries: 0,
      }).chat.completions.create({
        model: "notes",
        messages: [{ role: "user", content: "save hi" }],
      })) as Completion;
      await first.close();

      const second = await postgresStore(url);
      const b = await listen({ agents: { notes: notesAgent() }, store: second, keys: KEYS });
      const view = (key: string) => fetch(`${b.baseURL}/runs/${waiting.id}`, { headers: json(key) });
      expect((await view(BOB)).status).toBe(404);
      expect(await (await view(ALICE)).json()).toMatchObject({ status: "waiting", sessionId: waiting.id });
      await second.close();
    });
  },
);
