// `agentloop mcp serve` (SPEC section 14) through the official MCP client over stdio, the model a
// fake OpenAI server.
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import {
  type CallToolResult,
  ElicitRequestSchema,
  type ElicitResult,
  ProgressNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";
import { afterEach, describe, expect, it } from "vitest";
import type { Message } from "../src/core/messages.js";
import {
  type FakeOpenAIServer,
  type FakeResponder,
  type FakeToolCall,
  startFakeOpenAIServer,
} from "../src/testing/fake-openai-server.js";
import { CLI, runCli } from "./helpers.js";

const GATE = fileURLToPath(new URL("./support/gate-mcp-server.mjs", import.meta.url));

let model: FakeOpenAIServer | undefined;
const clients: Client[] = [];
afterEach(async () => {
  for (const client of clients.splice(0)) await client.close().catch(() => {});
  await model?.close();
  model = undefined;
});

interface WireMessage {
  role: string;
  content?: string | null;
  tool_call_id?: string;
}

/** A model that asks for `calls` on a new task, then answers with the tool results it got. */
const callsThenAnswer =
  (calls: FakeToolCall[]): FakeResponder =>
  (request) => {
    const messages = request.body.messages as WireMessage[];
    if (messages.at(-1)?.role === "user") return { text: "", toolCalls: calls };
    const results = messages.filter((m) => m.role === "tool").map((m) => `${m.tool_call_id}=${m.content}`);
    return { text: `Results: ${results.join("; ")}` };
  };

/** A folder with `config` as agentloop.json and the fake model answering with `respond`. */
async function workspace(respond: FakeResponder, config: object = {}) {
  const dir = mkdtempSync(join(tmpdir(), "agentloop-mcp-serve-"));
  writeFileSync(join(dir, "agentloop.json"), JSON.stringify(config));
  model = await startFakeOpenAIServer({ respond });
  const env = { PATH: process.env.PATH ?? "", OPENAI_BASE_URL: model.url, OPENAI_API_KEY: "sk-test" };
  return { dir, env };
}

interface Connected {
  client: Client;
  /** Every message of the transport that was not a JSON-RPC message, and other transport errors. */
  errors: Error[];
  stderr: () => string;
}

/** The official client connected to `agentloop mcp serve ...args` in `dir`; `elicit` answers approval forms. */
async function connect(
  w: { dir: string; env: Record<string, string> },
  args: string[] = [],
  elicit?: (params: { message: string; requestedSchema: unknown }) => ElicitResult,
): Promise<Connected> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [CLI, "mcp", "serve", ...args],
    env: w.env,
    cwd: w.dir,
    stderr: "pipe",
  });
  let stderr = "";
  transport.stderr?.on("data", (d: Buffer) => {
    stderr += d.toString("utf8");
  });
  const client = new Client(
    { name: "test-client", version: "1.0.0" },
    elicit ? { capabilities: { elicitation: { form: {} } } } : {},
  );
  if (elicit) {
    client.setRequestHandler(ElicitRequestSchema, (request) =>
      elicit(request.params as { message: string; requestedSchema: unknown }),
    );
  }
  const errors: Error[] = [];
  client.onerror = (error) => errors.push(error);
  await client.connect(transport);
  clients.push(client);
  return { client, errors, stderr: () => stderr };
}

const text = (result: unknown) =>
  ((result as CallToolResult).content as { type: string; text: string }[]).map((c) => c.text).join("\n");

const calc = (id: string, expression = "6*7"): FakeToolCall => ({
  id,
  name: "calculator",
  arguments: { expression },
});

describe("agentloop mcp serve", () => {
  it("offers each configured sub-agent as a tool named after it (task), run on its own instructions", async () => {
    const w = await workspace(
      (request) => {
        const messages = request.body.messages as WireMessage[];
        const system = messages.find((m) => m.role === "system")?.content ?? "";
        return { text: system.includes("You research.") ? "researched" : "top level" };
      },
      { agents: { researcher: { description: "Finds facts.", instructions: "You research." } } },
    );
    const { client } = await connect(w);
    const { tools } = await client.listTools();
    const researcher = tools.find((t) => t.name === "researcher");
    expect(researcher?.description).toContain("Finds facts.");
    expect(researcher?.inputSchema.required).toEqual(["task"]);
    expect(text(await client.callTool({ name: "researcher", arguments: { task: "Find it." } }))).toBe(
      "researched",
    );
    expect(text(await client.callTool({ name: "run_agent", arguments: { task: "Go." } }))).toBe("top level");
  });

  it("offers run_agent (task, optional session) and answers with the run's output; progress notifications carry each event", async () => {
    const w = await workspace(callsThenAnswer([calc("c1")]));
    const { client, errors } = await connect(w);
    const { tools } = await client.listTools();
    const runAgent = tools.find((t) => t.name === "run_agent");
    expect(runAgent?.inputSchema.required).toEqual(["task"]);
    expect(Object.keys(runAgent?.inputSchema.properties ?? {}).sort()).toEqual(["session", "task"]);

    // The SDK's own progress handler is dropped once the response is read: collect them all here.
    const progress: { progress: number; message?: string | undefined }[] = [];
    client.setNotificationHandler(ProgressNotificationSchema, (n) => {
      progress.push(n.params);
    });
    const result = await client.callTool({
      name: "run_agent",
      arguments: { task: "Compute 6*7." },
      _meta: { progressToken: "p1" },
    });
    expect(result.isError).toBeFalsy();
    expect(text(result)).toBe("Results: c1=42");

    expect(progress.map((p) => p.progress)).toEqual(progress.map((_, i) => i + 1));
    const events = progress.map((p) => JSON.parse(p.message ?? "") as { type: string; [k: string]: unknown });
    expect(events[0]?.type).toBe("iteration_start");
    expect(events.find((e) => e.type === "tool_call")).toMatchObject({
      id: "c1",
      name: "calculator",
      arguments: { expression: "6*7" },
    });
    expect(events.find((e) => e.type === "tool_result")).toMatchObject({ id: "c1", content: "42" });
    expect(events.at(-1)).toMatchObject({ type: "turn_complete", stopReason: "final_answer" });

    // Without a progress token, no notification.
    const before = progress.length;
    expect(text(await client.callTool({ name: "run_agent", arguments: { task: "Again." } }))).toBe(
      "Results: c1=42",
    );
    expect(progress.length).toBe(before);
    expect(errors).toEqual([]);
  });

  it("is an error result naming the stop when the run stops on max_iterations; bad arguments are an error result too", async () => {
    const w = await workspace(() => ({
      text: "Working on it.",
      toolCalls: [{ name: "calculator", arguments: { expression: "1+1" } }],
    }));
    const { client } = await connect(w, ["--max-iterations", "1"]);
    const result = await client.callTool({ name: "run_agent", arguments: { task: "Loop." } });
    expect(result.isError).toBe(true);
    expect(text(result)).toContain("max_iterations");
    expect(text(result)).toContain("Working on it.");

    const bad = await client.callTool({ name: "run_agent", arguments: { session: "s" } });
    expect(bad.isError).toBe(true);
    expect(text(bad)).toMatch(/task/);
    const empty = await client.callTool({ name: "run_agent", arguments: { task: " " } });
    expect(empty.isError).toBe(true);
    expect(text(empty)).toBe("The task is empty: say what the agent should do.");
    const badSession = await client.callTool({
      name: "run_agent",
      arguments: { task: "x", session: "no spaces allowed" },
    });
    expect(badSession.isError).toBe(true);
    expect(text(badSession)).toMatch(/session: invalid id/);
  });

  it("refuses a second call on a session while the first runs", async () => {
    const dir = mkdtempSync(join(tmpdir(), "agentloop-mcp-busy-"));
    const log = join(dir, "gate.log");
    const gate = join(dir, "gate");
    const w = await workspace(
      (request) => {
        const last = (request.body.messages as WireMessage[]).at(-1);
        if (last?.role === "user") return { toolCalls: [{ id: "w1", name: "wait_for_file", arguments: {} }] };
        return { text: "Gate open." };
      },
      { mcpServers: { gate: { command: process.execPath, args: [GATE, log, gate] } } },
    );
    const { client } = await connect(w);
    const first = client.callTool({ name: "run_agent", arguments: { task: "Wait.", session: "busy" } });
    while (!(existsSync(log) && readFileSync(log, "utf8").includes("wait started")))
      await new Promise((r) => setTimeout(r, 20));
    const second = await client.callTool({
      name: "run_agent",
      arguments: { task: "Me too.", session: "busy" },
    });
    expect(second.isError).toBe(true);
    expect(text(second)).toBe(
      "Session 'busy' is in use by another call: wait for its answer, or use another session.",
    );
    writeFileSync(gate, "");
    expect(text(await first)).toBe("Gate open.");
  });

  it("cancellation aborts the run and its tool call; the server keeps serving", async () => {
    const dir = mkdtempSync(join(tmpdir(), "agentloop-mcp-cancel-"));
    const log = join(dir, "gate.log");
    const gate = join(dir, "gate");
    const w = await workspace(
      (request) => {
        const messages = request.body.messages as WireMessage[];
        const task = messages.at(-1);
        if (task?.role === "user" && String(task.content).includes("wait"))
          return { toolCalls: [{ id: "w1", name: "wait_for_file", arguments: {} }] };
        return { text: "Done." };
      },
      { mcpServers: { gate: { command: process.execPath, args: [GATE, log, gate] } } },
    );
    const { client } = await connect(w);
    const controller = new AbortController();
    const call = client.callTool({ name: "run_agent", arguments: { task: "Please wait." } }, undefined, {
      signal: controller.signal,
    });
    while (!(existsSync(log) && readFileSync(log, "utf8").includes("wait started")))
      await new Promise((r) => setTimeout(r, 20));
    controller.abort("changed my mind");
    await expect(call).rejects.toThrow();
    while (!readFileSync(log, "utf8").includes("wait aborted")) await new Promise((r) => setTimeout(r, 20));
    expect(readFileSync(log, "utf8")).not.toContain("wait done");

    const next = await client.callTool({ name: "run_agent", arguments: { task: "Say done." } });
    expect(text(next)).toBe("Done.");
  });
});

describe("approvals", () => {
  const config = { approval: { require: ["calculator"] } };

  it("are asked through elicitation when the client declares it: approve runs the call, decline denies it", async () => {
    const w = await workspace(callsThenAnswer([calc("c1")]), config);
    const asked: { message: string; requestedSchema: unknown }[] = [];
    let answer: ElicitResult = { action: "accept", content: { approve: true } };
    const { client } = await connect(w, [], (params) => {
      asked.push(params);
      return answer;
    });
    const approved = await client.callTool({ name: "run_agent", arguments: { task: "Compute." } });
    expect(text(approved)).toBe("Results: c1=42");
    expect(asked[0]?.message).toContain("calculator");
    expect(asked[0]?.message).toContain('{"expression":"6*7"}');
    expect(asked[0]?.requestedSchema).toMatchObject({
      type: "object",
      properties: { approve: { type: "boolean" } },
    });

    answer = { action: "decline" };
    const declined = await client.callTool({ name: "run_agent", arguments: { task: "Compute." } });
    expect(declined.isError).toBeFalsy();
    expect(text(declined)).toBe("Results: c1=The user declined this call: it was not run.");

    answer = { action: "accept", content: { approve: false } };
    const refused = await client.callTool({ name: "run_agent", arguments: { task: "Compute." } });
    expect(text(refused)).toBe("Results: c1=The user declined this call: it was not run.");
    expect(asked).toHaveLength(3);
  });

  it("without elicitation, the result names the waiting calls and how to continue; approve on the session continues the stored run, which the CLI sees", async () => {
    const w = await workspace(callsThenAnswer([calc("c1"), calc("c2", "2+3")]), config);
    const { client } = await connect(w);

    const lone = await client.callTool({ name: "run_agent", arguments: { task: "Compute." } });
    expect(lone.isError).toBeFalsy();
    expect(text(lone)).toContain("c1: calculator");
    expect(text(lone)).toMatch(/pass a session/);

    const waiting = await client.callTool({
      name: "run_agent",
      arguments: { task: "Compute.", session: "s1" },
    });
    expect(waiting.isError).toBeFalsy();
    expect(text(waiting)).toContain('c1: calculator {"expression":"6*7"}');
    expect(text(waiting)).toContain('c2: calculator {"expression":"2+3"}');
    expect(text(waiting)).toContain('session "s1" and the task "approve"');
    expect(text(waiting)).toContain("agentloop run --session s1 --approve all");

    const done = await client.callTool({ name: "run_agent", arguments: { task: "approve", session: "s1" } });
    expect(text(done)).toBe("Results: c1=42; c2=5");

    // The same store as run --session: the CLI sees the conversation and continues it.
    const shown = await runCli(["sessions", "show", "s1", "--json"], { cwd: w.dir, env: w.env });
    const messages = JSON.parse(shown.stdout) as Message[];
    expect(messages.at(-1)).toMatchObject({ role: "assistant", content: "Results: c1=42; c2=5" });
    const again = await runCli(["run", "--session", "s1", "Once more."], { cwd: w.dir, env: w.env });
    expect(again.code).toBe(8);
    expect(again.stderr).toContain("--approve");

    // ...and the MCP client denies what the CLI left waiting.
    const denied = await client.callTool({ name: "run_agent", arguments: { task: "deny", session: "s1" } });
    expect(text(denied)).toMatch(
      /c1=The user declined this call: it was not run\.; c2=The user declined this call: it was not run\.$/,
    );
  });
});

describe("an interrupted run", () => {
  it("continues on its session with the task resume, in a new server process", async () => {
    const dir = mkdtempSync(join(tmpdir(), "agentloop-mcp-resume-"));
    const log = join(dir, "gate.log");
    const gate = join(dir, "gate");
    const w = await workspace(
      (request) => {
        const last = (request.body.messages as WireMessage[]).at(-1);
        if (last?.role === "user") return { toolCalls: [{ id: "w1", name: "wait_for_file", arguments: {} }] };
        return { text: `After the wait: ${last?.content}` };
      },
      { mcpServers: { gate: { command: process.execPath, args: [GATE, log, gate] } } },
    );
    const first = await connect(w);
    void first.client
      .callTool({ name: "run_agent", arguments: { task: "Wait.", session: "r" } })
      .catch(() => {});
    while (!(existsSync(log) && readFileSync(log, "utf8").includes("wait started")))
      await new Promise((r) => setTimeout(r, 20));
    process.kill((first.client.transport as StdioClientTransport).pid as number, "SIGKILL");

    const second = await connect(w);
    const refused = await second.client.callTool({
      name: "run_agent",
      arguments: { task: "Hello.", session: "r" },
    });
    expect(refused.isError).toBe(true);
    expect(text(refused)).toContain('the task "resume"');
    writeFileSync(gate, "");
    const resumed = await second.client.callTool({
      name: "run_agent",
      arguments: { task: "resume", session: "r" },
    });
    expect(text(resumed)).toBe("After the wait: gate open");
  });
});

describe("questions", () => {
  it("a question is the result, with how to answer it; the answer on the session continues the run", async () => {
    const w = await workspace(
      (request) => {
        const messages = request.body.messages as WireMessage[];
        const answered = messages.find((m) => m.role === "tool");
        if (!answered)
          return { toolCalls: [{ id: "q1", name: "ask_question", arguments: { question: "Which city?" } }] };
        return {
          toolCalls: [
            { id: "d1", name: "task_completion", arguments: { result: `Weather for ${answered.content}` } },
          ],
        };
      },
      { mode: "explicit" },
    );
    const { client } = await connect(w);
    const asked = await client.callTool({ name: "run_agent", arguments: { task: "Weather?", session: "q" } });
    expect(asked.isError).toBeFalsy();
    const [question, how] = (asked.content as { text: string }[]).map((c) => c.text);
    expect(question).toBe("Which city?");
    expect(how).toContain('session "q" and the answer as the task');
    const done = await client.callTool({ name: "run_agent", arguments: { task: "Paris", session: "q" } });
    expect(text(done)).toBe("Weather for Paris");
  });
});

describe("options of run", () => {
  it("--yes approves every call without asking; --session is the session of calls that name none", async () => {
    const w = await workspace(callsThenAnswer([calc("c1")]), { approval: { require: ["calculator"] } });
    const asked: string[] = [];
    const { client } = await connect(
      w,
      ["--yes", "--session", "d1", "--system", "Be brief."],
      ({ message }) => {
        asked.push(message);
        return { action: "decline" };
      },
    );
    expect(text(await client.callTool({ name: "run_agent", arguments: { task: "Compute." } }))).toBe(
      "Results: c1=42",
    );
    expect(asked).toEqual([]);
    const system = ((model?.requests[0]?.body.messages ?? []) as WireMessage[])[0];
    expect(system).toMatchObject({ role: "system" });
    expect(String(system?.content)).toContain("Be brief.");
    const shown = await runCli(["sessions", "show", "d1", "--json"], { cwd: w.dir, env: w.env });
    expect((JSON.parse(shown.stdout) as Message[]).at(-1)).toMatchObject({ content: "Results: c1=42" });
  });
});

describe("stdout in stdio mode", () => {
  it("carries nothing but JSON-RPC messages, even with warnings and --verbose; the logs go to stderr", async () => {
    const w = await workspace(callsThenAnswer([calc("c1")]), {
      mcpServers: { broken: { command: process.execPath, args: ["-e", "process.exit(3)"], optional: true } },
    });
    const child = spawn(process.execPath, [CLI, "mcp", "serve", "--verbose"], {
      cwd: w.dir,
      env: w.env,
      stdio: ["pipe", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => {
      stdout += d;
    });
    child.stderr.setEncoding("utf8").on("data", (d: string) => {
      stderr += d;
    });
    const send = (message: object) => child.stdin.write(`${JSON.stringify(message)}\n`);
    send({
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "1" } },
    });
    send({ jsonrpc: "2.0", method: "notifications/initialized" });
    send({
      jsonrpc: "2.0",
      id: 2,
      method: "tools/call",
      params: { name: "run_agent", arguments: { task: "Compute." }, _meta: { progressToken: 7 } },
    });
    child.stdin.write("this is not JSON\n");
    send({ jsonrpc: "2.0", id: 3, method: "no/such/method" });
    send({ jsonrpc: "2.0", id: 4, method: "tools/call", params: { name: "no_such_tool", arguments: {} } });
    while (!['"id":2}', '"id":3', '"id":4'].every((id) => stdout.includes(id)))
      await new Promise((r) => setTimeout(r, 20));
    child.stdin.end();
    const code = await new Promise((resolve) => child.on("close", resolve));
    expect(code).toBe(0);
    const lines = stdout.split("\n");
    expect(lines.pop()).toBe("");
    for (const line of lines) expect(JSON.parse(line)).toMatchObject({ jsonrpc: "2.0" });
    const byId = (id: number) => lines.map((l) => JSON.parse(l)).find((m) => m.id === id);
    expect(byId(2).result.content[0].text).toBe("Results: c1=42");
    expect(byId(3).error.code).toBe(-32601);
    expect(JSON.stringify(byId(4))).toContain("no_such_tool");
    const progress = lines.map((l) => JSON.parse(l)).filter((m) => m.method === "notifications/progress");
    expect(progress.length).toBeGreaterThan(3);
    expect(JSON.parse(progress.at(-1).params.message)).toMatchObject({ type: "turn_complete" });
    expect(stderr).toContain("MCP server 'broken'");
    expect(stderr).toContain("serving gpt-4o-mini over MCP on stdio");
  });
});
