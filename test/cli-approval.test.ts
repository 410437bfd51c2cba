import { existsSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import type { Message } from "../src/core/messages.js";
import {
  type FakeOpenAIServer,
  type FakeResponder,
  type FakeToolCall,
  startFakeOpenAIServer,
} from "../src/testing/fake-openai-server.js";
import { runCli } from "./helpers.js";
import { terminal } from "./support/terminal.js";

const FILESYSTEM = fileURLToPath(
  new URL("../node_modules/@modelcontextprotocol/server-filesystem/dist/index.js", import.meta.url),
);
const root = realpathSync(mkdtempSync(join(tmpdir(), "agentloop-cli-approval-")));
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

/**
 * A workspace whose model first asks for `calls`, then answers with the tool results it got.
 * `config` is written as agentloop.json, in `dir` (default a new folder).
 */
async function workspace(calls: FakeToolCall[], config: object = {}, dir = mkdtempSync(join(root, "w-"))) {
  writeFileSync(join(dir, "agentloop.json"), JSON.stringify(config));
  const respond: FakeResponder = (request) => {
    const messages = request.body.messages as WireMessage[];
    const last = messages.at(-1);
    if (last?.role === "user") return { text: "Let me do that.", toolCalls: calls };
    const results = messages.filter((m) => m.role === "tool").map((m) => `${m.tool_call_id}=${m.content}`);
    return { text: `Results: ${results.join("; ")}` };
  };
  server = await startFakeOpenAIServer({ respond });
  const env = { OPENAI_BASE_URL: server.url, OPENAI_API_KEY: "sk-test" };
  const cli = (args: string[]) => runCli(args, { cwd: dir, env });
  return {
    dir,
    env,
    cli,
    stored: async (id = "s") =>
      JSON.parse((await cli(["sessions", "show", id, "--json"])).stdout) as Message[],
    /** The tool messages of model request `index`, as "id=content". */
    results: (index: number) =>
      ((server?.requests[index]?.body.messages ?? []) as WireMessage[])
        .filter((m) => m.role === "tool")
        .map((m) => `${m.tool_call_id}=${m.content}`),
  };
}

const calc = (id: string, expression = "6*7"): FakeToolCall => ({
  id,
  name: "calculator",
  arguments: { expression },
});
const time: FakeToolCall = { id: "t1", name: "get_current_time", arguments: { timezone: "UTC" } };
const REQUIRE_CALC = { approval: { require: ["calc*"] } };
const events = (stdout: string) =>
  stdout
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line) as { type: string; [key: string]: unknown });

describe("calls that need approval, without a terminal", () => {
  it("run the others, stop with approval_required (exit 8), and continue with --approve, results in call order", async () => {
    const w = await workspace([calc("c1"), time], REQUIRE_CALC);
    const waiting = await w.cli(["run", "--session", "s", "--json", "Compute and tell the time."]);
    expect(waiting.code).toBe(8);
    const list = events(waiting.stdout);
    expect(list.filter((e) => e.type === "tool_result").map((e) => e.id)).toEqual(["t1"]);
    expect(list.find((e) => e.type === "approval_request")).toMatchObject({ id: "c1", name: "calculator" });
    expect(list.at(-1)).toMatchObject({
      type: "turn_complete",
      stopReason: "approval_required",
      sessionId: "s",
      pendingApprovals: [{ id: "c1", name: "calculator", arguments: { expression: "6*7" } }],
    });
    expect(waiting.stderr).toContain("continue with: agentloop run --session s --approve c1");
    expect((await w.cli(["sessions", "--json"])).stdout).toContain('"stopReason": "approval_required"');

    const approved = await w.cli(["run", "--session", "s", "--approve", "c1"]);
    expect(approved).toMatchObject({ code: 0, stderr: "" });
    expect(w.results(1)).toEqual(["c1=42", expect.stringMatching(/^t1=\d{4}-/)]);
    expect(approved.stdout).toMatch(/^Results: c1=42; t1=/);
    const tools = (await w.stored()).filter((m) => m.role === "tool");
    expect(tools.map((m) => (m.role === "tool" ? m.toolCallId : ""))).toEqual(["c1", "t1"]);
    expect(server?.requests).toHaveLength(2);
  });

  it("print the last assistant text and one line saying how to continue; --deny declines", async () => {
    const w = await workspace([calc("c1"), calc("c2", "1+1")], REQUIRE_CALC);
    const waiting = await w.cli(["run", "--session", "s", "Compute twice."]);
    expect(waiting).toMatchObject({
      code: 8,
      stdout: "Let me do that.\n",
      stderr:
        "agentloop: approval_required: 2 calls wait for approval: c1 (calculator), c2 (calculator); continue with: agentloop run --session s --approve c1,c2 (or all), or --deny <ids>|all\n",
    });
    const prompt = await w.cli(["run", "--session", "s", "something else"]);
    expect(prompt.code).toBe(2);
    expect(prompt.stderr).toBe(
      "agentloop: session 's' waits for approval of c1 (calculator), c2 (calculator): decide with agentloop run --session s --approve <ids>|all or --deny <ids>|all, then send your prompt\n",
    );
    const both = await w.cli(["run", "--session", "s", "--approve", "c1", "--deny", "c1"]);
    expect(both).toMatchObject({
      code: 2,
      stderr: "agentloop: call 'c1' is both approved and denied: name it once.\n",
    });

    const decided = await w.cli(["run", "--session", "s", "--approve", "all", "--deny", "c2"]);
    expect(decided.code).toBe(0);
    expect(w.results(1)).toEqual(["c1=42", "c2=The user declined this call: it was not run."]);
    const stored = (await w.stored()).filter((m) => m.role === "tool");
    expect(stored.at(-1)).toMatchObject({ toolCallId: "c2", isError: true });
  });

  it("an unknown id is exit 2 naming the waiting calls, and changes nothing", async () => {
    const w = await workspace([calc("c1")], REQUIRE_CALC);
    await w.cli(["run", "--session", "s", "Compute."]);
    const before = await w.stored();
    const unknown = await w.cli(["run", "--session", "s", "--approve", "c1,nope"]);
    expect(unknown).toMatchObject({
      code: 2,
      stdout: "",
      stderr:
        "agentloop: --approve: no call 'nope' waits for approval in session 's'; waiting: c1 (calculator) (or all)\n",
    });
    const denyUnknown = await w.cli(["run", "--session", "s", "--deny", "x9"]);
    expect(denyUnknown.stderr).toContain("--deny: no call 'x9' waits for approval");
    // An id of 100,000 characters (near the 128 KiB an argument may have) is echoed as a prefix.
    const long = "x".repeat(100_000);
    for (const args of [
      ["--approve", long],
      ["--deny", `c1,${long}`],
      ["--approve", long, "--deny", long],
    ]) {
      const refused = await w.cli(["run", "--session", "s", ...args]);
      expect(refused.code).toBe(2);
      expect(refused.stderr).toContain(`'${"x".repeat(80)}…'`);
      expect(refused.stderr.length).toBeLessThan(300);
    }
    expect(await w.cli(["run", "--session", "s", "--approve", "c1", "more"])).toMatchObject({ code: 2 });
    expect(await w.cli(["run", "--approve", "c1"])).toMatchObject({
      code: 2,
      stderr: "agentloop: --approve continues a stored run: name its session with --session <id>.\n",
    });
    expect(await w.stored()).toEqual(before);
    expect(server?.requests).toHaveLength(1);
    // The right id still continues it.
    expect(await w.cli(["run", "--session", "s", "--approve", "all"])).toMatchObject({ code: 0 });
    expect(w.results(1)).toEqual(["c1=42"]);
    // Nothing waits any more.
    const again = await w.cli(["run", "--session", "s", "--approve", "c1"]);
    expect(again.code).toBe(2);
    expect(again.stderr).toMatch(
      /^agentloop: nothing waits for approval: the last run of session 's' completed/,
    );
  });

  it("without --session the line says how to use one; --yes approves every call", async () => {
    const w = await workspace([calc("c1")], REQUIRE_CALC);
    const waiting = await w.cli(["run", "Compute."]);
    expect(waiting.code).toBe(8);
    expect(waiting.stderr).toBe(
      "agentloop: approval_required: 1 call waits for approval: c1 (calculator); they did not run and nothing was stored: run the task again with --session <id> to decide later with --approve/--deny, or in a terminal to be asked, or with --yes to approve every call\n",
    );
    expect(existsSync(join(w.dir, ".agentloop"))).toBe(false);
    const yes = await w.cli(["run", "--yes", "Compute."]);
    expect(yes).toMatchObject({ code: 0, stdout: "Results: c1=42\n" });
  });

  it("config approval lists take globs; allow wins over require; an unknown key is refused", async () => {
    const w = await workspace([calc("c1"), time], {
      approval: { require: ["*"], allow: ["get_?urrent_time"] },
    });
    const waiting = await w.cli(["run", "--json", "Go."]);
    expect(waiting.code).toBe(8);
    expect(events(waiting.stdout).at(-1)).toMatchObject({ pendingApprovals: [{ id: "c1" }] });

    writeFileSync(join(w.dir, "agentloop.json"), JSON.stringify({ approval: { requir: ["x"] } }));
    const bad = await w.cli(["run", "Go."]);
    expect(bad).toMatchObject({
      code: 2,
      stderr:
        "agentloop: unknown key 'approval.requir' in agentloop.json: remove it (docs/config.md lists every key).\n",
    });
    writeFileSync(join(w.dir, "agentloop.json"), JSON.stringify({ approval: { allow: "write_file" } }));
    expect((await w.cli(["run", "Go."])).stderr).toMatch(
      /^agentloop: 'approval.allow' in agentloop.json is invalid/,
    );
  });
});

describe("run options on commands that start no run", () => {
  it("are left out of their --help, which lists what applies", async () => {
    const help = async (command: string) => (await runCli([command, "--help"])).stdout;
    const flags = (text: string) => [...text.matchAll(/^ {2}(--[\w-]+)/gm)].map((m) => m[1]);
    const serve = flags(await help("serve"));
    expect(serve).toEqual(expect.arrayContaining(["--model", "--config", "--lease", "--resume-orphans"]));
    for (const flag of ["--session", "--resume", "--approve", "--deny", "--yes", "--image", "--json"])
      expect(serve).not.toContain(flag);
    expect(flags(await help("tools"))).toEqual(["--config", "--no-builtin-tools", "--json", "--verbose"]);
    const chat = flags(await help("chat"));
    expect(chat).toEqual(expect.arrayContaining(["--session", "--resume", "--yes", "--model"]));
    expect(chat).not.toContain("--image");
    expect(flags(await help("run"))).toEqual(
      expect.arrayContaining(["--session", "--image", "--json", "--model"]),
    );
  });

  it("are refused with one line", async () => {
    for (const [args, flag] of [
      [["tools", "--yes"], "--yes"],
      [["tools", "--session", "s"], "--session"],
      [["serve", "--approve", "all"], "--approve"],
      [["serve", "--resume"], "--resume"],
    ] as const) {
      const run = await runCli([...args]);
      expect(run).toMatchObject({
        code: 2,
        stderr: `agentloop: ${flag} does not apply to agentloop ${args[0]}: use it with run or chat.\n`,
      });
    }
  });
});

describe("MCP tools annotated destructiveHint (the filesystem server's write_file)", () => {
  it("wait for approval while read-only tools run; config allow lets them run", async () => {
    const files = mkdtempSync(join(root, "files-"));
    writeFileSync(join(files, "in.txt"), "input text");
    const mcpServers = { files: { command: process.execPath, args: [FILESYSTEM, files] } };
    const write = {
      id: "w1",
      name: "write_file",
      arguments: { path: join(files, "out.txt"), content: "written" },
    };
    const read = { id: "r1", name: "read_text_file", arguments: { path: join(files, "in.txt") } };
    // The working directory: the server's root (MCP roots), so the files are in reach.
    const w = await workspace([write, read], { mcpServers }, files);

    const waiting = await w.cli(["run", "--session", "s", "--json", "Copy it."]);
    expect(waiting.code).toBe(8);
    expect(events(waiting.stdout).at(-1)).toMatchObject({
      pendingApprovals: [{ id: "w1", name: "write_file" }],
    });
    expect(existsSync(join(files, "out.txt"))).toBe(false);
    expect(events(waiting.stdout).find((e) => e.type === "tool_result")).toMatchObject({
      id: "r1",
      content: "input text",
    });
    expect(await w.cli(["run", "--session", "s", "--approve", "w1"])).toMatchObject({ code: 0 });
    expect(readFileSync(join(files, "out.txt"), "utf8")).toBe("written");

    rmSync(join(files, "out.txt"));
    writeFileSync(
      join(w.dir, "agentloop.json"),
      JSON.stringify({ mcpServers, approval: { allow: ["write_*"] } }),
    );
    expect(await w.cli(["run", "Copy it."])).toMatchObject({ code: 0 });
    expect(readFileSync(join(files, "out.txt"), "utf8")).toBe("written");
  }, 60_000);
});

describe("approvals in a terminal", () => {
  it("run shows the call and asks on one key: y runs it, n declines it, a allows the tool for the session", async () => {
    const w = await workspace([calc("c1"), calc("c2", "1+1"), calc("c3", "2+2")], REQUIRE_CALC);
    const run = terminal(["run", "--session", "s", "Compute three times."], { cwd: w.dir, env: w.env });
    await run.waitFor('expression: "6*7"');
    expect(run.output).toMatch(/calculator.* wants to run .*\(c1\)/);
    // One key answers, without Enter; another key asks again.
    await run.waitFor("[a]lways allow calculator: ");
    run.type("m");
    await run.waitFor("Type y to run it, n to decline it");
    await run.waitFor("[a]lways allow calculator: ");
    run.type("y");
    await run.waitFor('expression: "1+1"');
    await run.waitFor("[a]lways allow calculator: ");
    run.type("n");
    await run.waitFor('expression: "2+2"');
    await run.waitFor("[a]lways allow calculator: ");
    run.type("a");
    expect(await run.exited).toBe(0);
    expect(w.results(1)).toEqual(["c1=42", "c2=The user declined this call: it was not run.", "c3=4"]);

    // "a" holds for the rest of the session: a later run asks nothing, even without a terminal.
    const later = await w.cli(["run", "--session", "s", "Again."]);
    expect(later).toMatchObject({ code: 0 });
    expect(w.results(3).slice(-3)).toEqual(["c1=42", "c2=2", "c3=4"]);
  });

  it("a new prompt on a session that waits asks about the waiting calls, finishes that run, then sends the prompt", async () => {
    const w = await workspace([calc("c1")], REQUIRE_CALC);
    expect((await w.cli(["run", "--session", "s", "Compute."])).code).toBe(8);
    const run = terminal(["run", "--session", "s", "And now?"], { cwd: w.dir, env: w.env });
    // A key typed with Enter out of habit: the Enter is passed over (it answers nothing next).
    await run.waitFor("[a]lways allow calculator: ");
    run.type("y\r");
    await run.waitFor("Results: c1=42");
    // The new prompt then runs (and asks for its own call).
    await run.waitFor("[a]lways allow calculator: ");
    run.type("n");
    expect(await run.exited).toBe(0);
    expect(server?.requests.map((r) => (r.body.messages as WireMessage[]).at(-1)?.content)).toEqual([
      "Compute.",
      "42",
      "And now?",
      "The user declined this call: it was not run.",
    ]);
  });

  it("chat asks inline and goes on with the conversation", async () => {
    const w = await workspace([calc("c1")], REQUIRE_CALC);
    const chat = terminal(["chat", "--session", "s"], { cwd: w.dir, env: w.env });
    await chat.waitFor("› ");
    chat.type("Compute.\r");
    await chat.waitFor("[a]lways allow calculator: ");
    expect(chat.output).toMatch(/calculator.* wants to run/);
    chat.type("y"); // one key, no Enter
    await chat.waitFor("Results: c1=42");
    await chat.waitFor("› ");
    // Ctrl+C at the question stops that answer; the next line is a message again.
    chat.type("Compute again.\r");
    await chat.waitFor("[a]lways allow calculator: ");
    chat.type("\x03");
    await chat.waitFor("aborted");
    await chat.waitFor("› ");
    chat.type("Compute once more.\r");
    await chat.waitFor("[a]lways allow calculator: ");
    chat.type("a");
    await chat.waitFor("Results: c1=42");
    await chat.waitFor("› ");
    chat.type("/exit\r");
    expect(await chat.exited).toBe(0);
    const sent = (server?.requests ?? []).map((r) => (r.body.messages as WireMessage[]).at(-1)?.content);
    expect(sent).toEqual(["Compute.", "42", "Compute again.", "Compute once more.", "42"]);
    expect((await w.stored()).map((m) => m.role)).toEqual([
      ...["user", "assistant", "tool", "assistant"],
      ...["user", "assistant", "tool"], // the aborted answer: its call closed as declined
      ...["user", "assistant", "tool", "assistant"],
    ]);
  });

  it("chat takes Ctrl+D at the question as no (as run does), finishes the answer, then ends on its own line", async () => {
    const w = await workspace([calc("c1")], REQUIRE_CALC);
    const chat = terminal(["chat", "--session", "s"], { cwd: w.dir, env: w.env });
    await chat.waitFor("› ");
    chat.type("Compute.\r");
    await chat.waitFor("[a]lways allow calculator: ");
    chat.type("\x04");
    await chat.waitFor("Results: c1=The user declined this call: it was not run.");
    expect(await chat.exited).toBe(0);
    expect(chat.output.endsWith("\n")).toBe(true);
    expect(JSON.parse((await w.cli(["sessions", "ls", "--json"])).stdout)).toMatchObject([
      { id: "s", status: "completed", stopReason: "final_answer" },
    ]);
  });
});
