// `run --session`, `chat --session`, `--resume`, answers to `ask_question`, `agentloop sessions`,
// and the bad input around them, through the built CLI against the fake OpenAI server.
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import type { Message } from "../src/core/messages.js";
import {
  type FakeOpenAIServer,
  type FakeResponder,
  startFakeOpenAIServer,
} from "../src/testing/fake-openai-server.js";
import { CLI, runCli } from "./helpers.js";

const root = mkdtempSync(join(tmpdir(), "agentloop-cli-session-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

let server: FakeOpenAIServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

interface WireMessage {
  role: string;
  content?: string | null;
  tool_call_id?: string;
}

/** A fresh folder (the default store lives under it) and a fake model answering with `respond`. */
async function workspace(respond: FakeResponder, extraEnv: Record<string, string> = {}) {
  const dir = mkdtempSync(join(root, "w-"));
  server = await startFakeOpenAIServer({ respond });
  const env = { OPENAI_BASE_URL: server.url, OPENAI_API_KEY: "sk-test", ...extraEnv };
  const cli = (args: string[], input?: string) =>
    runCli(args, { cwd: dir, env, ...(input !== undefined && { input }) });
  return {
    dir,
    env,
    cli,
    stored: async (id = "s"): Promise<Message[]> => {
      const show = await cli(["sessions", "show", id, "--json"]);
      expect(show.stderr).toBe("");
      return JSON.parse(show.stdout) as Message[];
    },
    summary: async (id = "s") => {
      const ls = await cli(["sessions", "ls", "--json"]);
      return (JSON.parse(ls.stdout) as { id: string; status: string; stopReason?: string }[]).find(
        (s) => s.id === id,
      );
    },
  };
}

const echo: FakeResponder = (request) => {
  const messages = request.body.messages as WireMessage[];
  const last = messages.at(-1);
  return { text: `Echo: ${last?.content} (${messages.filter((m) => m.role !== "system").length} messages)` };
};

const lines = (text: string) => text.trim().split("\n");

describe("agentloop run --session", () => {
  it("loads the stored history before the new message and stores everything after it", async () => {
    const w = await workspace(echo);
    expect(await w.cli(["run", "no session"])).toMatchObject({ code: 0 });
    expect(existsSync(join(w.dir, ".agentloop"))).toBe(false); // nothing stored without --session

    expect(await w.cli(["run", "--session", "s", "first"])).toMatchObject({
      code: 0,
      stdout: "Echo: first (1 messages)\n",
    });
    expect(existsSync(join(w.dir, ".agentloop", "agentloop.db"))).toBe(true);
    const second = await w.cli(["run", "--session", "s", "second"]);
    expect(second).toMatchObject({ code: 0, stdout: "Echo: second (3 messages)\n", stderr: "" });
    const sent = ((server?.requests[2]?.body.messages ?? []) as WireMessage[]).filter(
      (m) => m.role !== "system",
    );
    expect(sent.map((m) => m.content)).toEqual(["first", "Echo: first (1 messages)", "second"]);
    expect(await w.stored()).toEqual([
      { role: "user", content: "first" },
      { role: "assistant", content: "Echo: first (1 messages)" },
      { role: "user", content: "second" },
      { role: "assistant", content: "Echo: second (3 messages)" },
    ]);
    // --json: turn_complete carries the session.
    const json = await w.cli(["run", "--session", "s", "--json", "third"]);
    expect(JSON.parse(lines(json.stdout).at(-1) as string)).toMatchObject({
      type: "turn_complete",
      sessionId: "s",
    });
  });

  it("continues after ask_question: the answer is that call's result", async () => {
    const w = await workspace((request) => {
      const last = (request.body.messages as WireMessage[]).at(-1);
      if (last?.role === "user") {
        return { toolCalls: [{ id: "q1", name: "ask_question", arguments: { question: "Where to?" } }] };
      }
      return { toolCalls: [{ name: "task_completion", arguments: { result: `Trip to ${last?.content}.` } }] };
    });
    const asked = await w.cli(["run", "--session", "trip", "--mode", "explicit", "Plan a trip."]);
    expect(asked).toMatchObject({ code: 6, stdout: "Where to?\n" });
    expect(asked.stderr).toBe(
      'agentloop: the agent asked a question: answer it with agentloop run --session trip "<answer>"\n',
    );
    expect(await w.summary("trip")).toMatchObject({ status: "waiting", stopReason: "ask_question" });
    const sessions = await w.cli(["sessions"]);
    expect(sessions.stdout).toMatch(/^trip\s+\S+ \S+\s+2\s+waiting \(answer\)$/m);

    const answered = await w.cli(["run", "--session", "trip", "--mode", "explicit", "Lisbon"]);
    expect(answered).toMatchObject({ code: 0, stdout: "Trip to Lisbon.\n" });
    const sent = server?.requests[1]?.body.messages as WireMessage[];
    expect(sent.at(-1)).toEqual({ role: "tool", tool_call_id: "q1", content: "Lisbon" });
    expect((await w.stored("trip")).slice(0, 3)).toEqual([
      { role: "user", content: "Plan a trip." },
      {
        role: "assistant",
        content: "",
        toolCalls: [{ id: "q1", name: "ask_question", arguments: '{"question":"Where to?"}' }],
      },
      { role: "tool", toolCallId: "q1", name: "ask_question", content: "Lisbon", isError: false },
    ]);
    expect(await w.summary("trip")).toMatchObject({ status: "completed", stopReason: "task_completion" });
  });

  it("refuses a new prompt after an interrupted run, naming --resume, and --resume finishes it", async () => {
    let stall = true;
    const w = await workspace((request) => {
      if (stall) return { stall: true, afterText: "Thinking" };
      return echo(request, 0);
    });
    const child = spawn(process.execPath, [CLI, "run", "--session", "s", "--json", "first"], {
      cwd: w.dir,
      env: { PATH: process.env.PATH ?? "", ...w.env },
      stdio: ["ignore", "pipe", "ignore"],
    });
    const exited = new Promise((resolve) => child.on("close", resolve));
    await new Promise<void>((resolve) => {
      child.stdout.on("data", (chunk: Buffer) => {
        if (chunk.toString().includes("message_delta")) resolve();
      });
    });
    child.kill("SIGKILL");
    await exited;
    stall = false;
    expect(await w.summary()).toMatchObject({ status: "interrupted" });

    const refused = await w.cli(["run", "--session", "s", "second"]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toBe(
      "agentloop: the last run of session 's' was interrupted: continue it with agentloop run --session s --resume (or use another --session)\n",
    );
    const withPrompt = await w.cli(["run", "--session", "s", "--resume", "second"]);
    expect(withPrompt.code).toBe(2);
    expect(withPrompt.stderr).toContain("drop the prompt");
    expect(await w.stored()).toEqual([{ role: "user", content: "first" }]);

    // Resumed with another model than it started with: it goes on, with a note saying so.
    const resumed = await w.cli(["run", "--session", "s", "--resume", "--model", "gpt-4o"]);
    expect(resumed).toMatchObject({ code: 0, stdout: "Echo: first (1 messages)\n" });
    expect(resumed.stderr).toMatch(
      /^agentloop: note: run run_[\w-]+ was started with model gpt-4o-mini; it goes on with gpt-4o \(pass --model gpt-4o-mini to keep it\)\n$/,
    );
    expect(server?.requests.at(-1)?.body.model).toBe("gpt-4o");
    expect(await w.stored()).toEqual([
      { role: "user", content: "first" },
      { role: "assistant", content: "Echo: first (1 messages)" },
    ]);
  });

  it("--resume on a completed or new session is exit 2, nothing to resume, and changes nothing", async () => {
    const w = await workspace(echo);
    await w.cli(["run", "--session", "s", "hello"]);
    const before = await w.stored();
    const done = await w.cli(["run", "--session", "s", "--resume"]);
    expect(done.code).toBe(2);
    expect(done.stderr).toBe(
      `agentloop: nothing to resume: the last run of session 's' completed (final_answer): send a new prompt with agentloop run --session s "<prompt>"\n`,
    );
    const fresh = await w.cli(["run", "--session", "other", "--resume"]);
    expect(fresh.code).toBe(2);
    expect(fresh.stderr).toMatch(/^agentloop: nothing to resume: session 'other' has no run yet/);
    expect(await w.cli(["run", "--resume"])).toMatchObject({
      code: 2,
      stderr: "agentloop: --resume continues a stored run: name its session with --session <id>.\n",
    });
    expect(await w.stored()).toEqual(before);
    expect(await w.summary()).toMatchObject({ status: "completed", stopReason: "final_answer" });
    expect(await w.summary("other")).toBeUndefined(); // a session only named by a refused command is not kept
    expect(server?.requests).toHaveLength(1);
  });
});

describe("agentloop sessions", () => {
  it("lists, shows and removes sessions, with --json, from AGENTLOOP_DB or the config's db", async () => {
    const w = await workspace(
      [
        { text: "One." },
        { toolCalls: [{ id: "c1", name: "calculator", arguments: { expression: "6*7" } }] },
        { text: "It is 42." },
      ],
      { AGENTLOOP_DB: "data/sessions.db" },
    );
    expect(await w.cli(["sessions"])).toEqual({
      code: 0,
      stdout: "",
      stderr: 'agentloop: no sessions yet: agentloop run --session <id> "<prompt>" starts one\n',
    });
    expect(existsSync(join(w.dir, "data"))).toBe(false); // reading creates no store
    await w.cli(["run", "--session", "a", "hello"]);
    await w.cli(["run", "--session", "b", "what is 6*7?"]);

    const ls = await w.cli(["sessions"]);
    expect(ls.code).toBe(0);
    const rows = lines(ls.stdout);
    expect(rows[0]).toMatch(/^ID\s+UPDATED\s+MESSAGES\s+STATUS$/);
    expect(rows[1]).toMatch(/^b\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\s+4\s+completed final_answer$/);
    expect(rows[2]).toMatch(/^a\s+.*\s+2\s+completed final_answer$/);
    const listed = JSON.parse((await w.cli(["sessions", "ls", "--json"])).stdout);
    expect(listed).toEqual([
      expect.objectContaining({ id: "b", messageCount: 4, status: "completed", stopReason: "final_answer" }),
      expect.objectContaining({ id: "a", messageCount: 2, status: "completed", stopReason: "final_answer" }),
    ]);
    expect(Number.isNaN(Date.parse(listed[0].updatedAt))).toBe(false);

    const show = await w.cli(["sessions", "show", "b"]);
    expect(show.code).toBe(0);
    expect(lines(show.stdout).slice(1)).toEqual([
      "user: what is 6*7?",
      '  → calculator {"expression":"6*7"}  (c1)',
      "  ← calculator: 42",
      "assistant: It is 42.",
    ]);
    expect(lines(show.stdout)[0]).toMatch(/^# session b · 4 messages · completed final_answer/);
    expect(JSON.parse((await w.cli(["sessions", "show", "a", "--json"])).stdout)).toEqual([
      { role: "user", content: "hello" },
      { role: "assistant", content: "One." },
    ]);

    expect(await w.cli(["sessions", "rm", "a"])).toMatchObject({ code: 0, stdout: "Removed session 'a'.\n" });
    expect(await w.cli(["sessions", "rm", "a"])).toMatchObject({
      code: 2,
      stderr: "agentloop: no session 'a' in the store: agentloop sessions lists them\n",
    });
    expect(await w.cli(["sessions", "show", "nope"])).toMatchObject({ code: 2 });
    expect(JSON.parse((await w.cli(["sessions", "--json"])).stdout).map((s: { id: string }) => s.id)).toEqual(
      ["b"],
    );

    // The config's "db" names the store when AGENTLOOP_DB is not set.
    writeFileSync(join(w.dir, "agentloop.json"), JSON.stringify({ db: "data/sessions.db" }));
    const fromConfig = await runCli(["sessions", "--json"], { cwd: w.dir });
    expect(JSON.parse(fromConfig.stdout).map((s: { id: string }) => s.id)).toEqual(["b"]);
  });
});

describe("agentloop chat --session", () => {
  it("loads the history and stores every turn, across chats", async () => {
    const w = await workspace(echo);
    const first = await w.cli(["chat", "--session", "c"], "first\nsecond\n");
    expect(first).toMatchObject({
      code: 0,
      stdout: "Echo: first (1 messages)\nEcho: second (3 messages)\n",
    });
    const again = await w.cli(["chat", "--session", "c"], "third\n");
    expect(again).toMatchObject({ code: 0, stdout: "Echo: third (5 messages)\n" });
    expect((await w.stored("c")).map((m) => m.content)).toEqual([
      "first",
      "Echo: first (1 messages)",
      "second",
      "Echo: second (3 messages)",
      "third",
      "Echo: third (5 messages)",
    ]);
    const runs = await w.summary("c");
    expect(runs).toMatchObject({ status: "completed", stopReason: "final_answer" });
    // A run continues the chat's session, too.
    expect(await w.cli(["run", "--session", "c", "fourth"])).toMatchObject({
      stdout: "Echo: fourth (7 messages)\n",
    });
  });

  it("refuses a line after an interrupted run (piped) and continues it with --resume", async () => {
    let stall = true;
    const w = await workspace((request) => (stall ? { stall: true, afterText: "Hmm" } : echo(request, 0)));
    const child = spawn(process.execPath, [CLI, "chat", "--session", "c"], {
      cwd: w.dir,
      env: { PATH: process.env.PATH ?? "", ...w.env },
      stdio: ["pipe", "pipe", "ignore"],
    });
    child.stdin.write("first\n");
    const exited = new Promise((resolve) => child.on("close", resolve));
    await new Promise<void>((resolve) => child.stdout.once("data", () => resolve()));
    child.kill("SIGKILL");
    await exited;
    stall = false;
    const refused = await w.cli(["chat", "--session", "c"], "second\n");
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain("was interrupted: continue it with agentloop run --session c --resume");
    const resumed = await w.cli(["chat", "--session", "c", "--resume"], "second\n");
    expect(resumed).toMatchObject({
      code: 0,
      stdout: "Echo: first (1 messages)\nEcho: second (3 messages)\n",
    });
    expect(await w.stored("c")).toHaveLength(4);
  });

  it("answers ask_question with the next line, stored as that call's result", async () => {
    const w = await workspace((request) => {
      const last = (request.body.messages as WireMessage[]).at(-1);
      if (last?.role === "user") {
        return { toolCalls: [{ id: "q1", name: "ask_question", arguments: { question: "Where to?" } }] };
      }
      return { toolCalls: [{ name: "task_completion", arguments: { result: `Trip to ${last?.content}.` } }] };
    });
    const chat = await w.cli(["chat", "--session", "t", "--mode", "explicit"], "Plan a trip.\nLisbon\n");
    expect(chat.code).toBe(0);
    expect(chat.stdout).toMatch(/^\? Where to\?$/m);
    expect(chat.stdout).toMatch(/\nTrip to Lisbon\.\n$/);
    const stored = await w.stored("t");
    expect(stored[2]).toEqual({
      role: "tool",
      toolCallId: "q1",
      name: "ask_question",
      content: "Lisbon",
      isError: false,
    });
    expect(stored).toHaveLength(5);
  });
});

describe("bad input around sessions: one line, exit 2, nothing stored lost or altered", () => {
  async function refusedStore(file: string, message: RegExp) {
    const w = await workspace(echo, { AGENTLOOP_DB: file });
    const before = readFileSync(file);
    for (const args of [["run", "--session", "s", "hello"], ["sessions"], ["sessions", "show", "s"]]) {
      const run = await w.cli(args);
      expect(run.code, args.join(" ")).toBe(2);
      expect(lines(run.stderr), args.join(" ")).toHaveLength(1);
      expect(run.stderr.trim()).toMatch(message);
    }
    expect(readFileSync(file).equals(before)).toBe(true);
    expect(server?.requests).toHaveLength(0);
  }

  it("a corrupted file, a text file and a foreign SQLite database are refused unchanged", async () => {
    const dir = mkdtempSync(join(root, "bad-"));
    const random = join(dir, "random.db");
    writeFileSync(random, Buffer.from(Array.from({ length: 8192 }, (_, i) => (i * 7919 + 13) % 251)));
    await refusedStore(
      random,
      /is not an agentloop database: move it away or set AGENTLOOP_DB to another file \(AGENTLOOP_DB\)$/,
    );
    const notes = join(dir, "notes.txt");
    writeFileSync(notes, "my notes\n");
    await refusedStore(notes, /is not an agentloop database/);
    const foreign = join(dir, "foreign.db");
    const db = new DatabaseSync(foreign);
    db.exec("CREATE TABLE sessions (x TEXT); INSERT INTO sessions VALUES ('theirs')");
    db.close();
    await refusedStore(foreign, /is not an agentloop database/);
  });

  it("a database from a newer agentloop is refused unchanged", async () => {
    const w = await workspace(echo);
    await w.cli(["run", "--session", "kept", "hello"]);
    const file = join(w.dir, ".agentloop", "agentloop.db");
    const db = new DatabaseSync(file);
    db.exec("PRAGMA user_version = 99");
    db.close();
    await server?.close();
    await refusedStore(
      file,
      /written by a newer agentloop \(schema 99.*\): upgrade agentloop \(AGENTLOOP_DB\)$/,
    );
  });

  it("an illegal session id is refused before any store is opened", async () => {
    const w = await workspace(echo);
    for (const id of ["a b", "../etc", "x".repeat(129), "é"]) {
      for (const command of [
        ["run", "--session", id, "hi"],
        ["chat", "--session", id],
        ["sessions", "show", id],
      ]) {
        const run = await w.cli(command);
        expect(run.code).toBe(2);
        expect(run.stderr).toMatch(
          /^agentloop: (--session: invalid id|invalid session id) ".*": use 1 to 128 characters of A-Z a-z 0-9 \. _ -\n$/,
        );
      }
    }
    expect(existsSync(join(w.dir, ".agentloop"))).toBe(false);
  });

  it("a store that cannot be written is one line naming AGENTLOOP_DB", async () => {
    const w = await workspace(echo);
    writeFileSync(join(w.dir, "file"), "x");
    for (const file of [join(w.dir, "file", "agentloop.db"), `/proc/agentloop-${process.pid}.db`]) {
      const run = await runCli(["run", "--session", "s", "hi"], {
        cwd: w.dir,
        env: { ...w.env, AGENTLOOP_DB: file },
      });
      expect(run.code).toBe(2);
      expect(lines(run.stderr)).toHaveLength(1);
      expect(run.stderr).toContain("AGENTLOOP_DB");
    }
    expect(readFileSync(join(w.dir, "file"), "utf8")).toBe("x");
    expect(server?.requests).toHaveLength(0);
  });

  it.skipIf(process.platform !== "linux")(
    "a disk that fills mid-run is one line and exit 2; what was stored before stays",
    async () => {
      const w = await workspace(echo);
      await w.cli(["run", "--session", "s", "small"]);
      const before = await w.stored();
      const dir = join(w.dir, ".agentloop");
      const size = ["agentloop.db", "agentloop.db-wal"].reduce(
        (sum, f) => sum + (existsSync(join(dir, f)) ? statSync(join(dir, f)).size : 0),
        0,
      );
      // A file size limit (ulimit -f, which binds root too) stands in for a full disk.
      const blocks = Math.ceil(size / 1024) + 64;
      const full = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
        const child = spawn(
          "/bin/sh",
          ["-c", `ulimit -f ${blocks} && exec "${process.execPath}" "${CLI}" run --session s`],
          { cwd: w.dir, env: { PATH: process.env.PATH ?? "", ...w.env }, stdio: ["pipe", "ignore", "pipe"] },
        );
        let stderr = "";
        child.stderr.setEncoding("utf8").on("data", (d: string) => {
          stderr += d;
        });
        child.on("close", (code) => resolve({ code, stderr }));
        child.stdin.end("y".repeat(400_000)); // a prompt larger than the room left
      });
      expect(full.code).toBe(2);
      expect(lines(full.stderr), full.stderr).toHaveLength(1);
      expect(full.stderr).toMatch(/^agentloop: .*AGENTLOOP_DB/);
      expect(await w.stored()).toEqual(before);
    },
  );
});
