/**
 * Replies whose tool calls a provider or the loop could choke on, through the CLI and the library:
 * two calls with one id (every adapter), arguments that are not one JSON object, an empty reply;
 * and sessions an older version stored with such calls, which must load and continue.
 */
import { mkdtempSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { Agent } from "../src/agent/agent.js";
import { newRunState } from "../src/agent/state.js";
import type { Message } from "../src/core/messages.js";
import { openAIChatModel } from "../src/models/openai-chat.js";
import { memoryStore } from "../src/store/memory-store.js";
import { sqliteStore } from "../src/store/sqlite-store.js";
import type { Json } from "../src/store/types.js";
import { startFakeAnthropicServer } from "../src/testing/fake-anthropic-server.js";
import { type FakeRequest, startFakeOpenAIServer } from "../src/testing/fake-openai-server.js";
import { startFakeResponsesServer } from "../src/testing/fake-responses-server.js";
import { scriptedModel } from "../src/testing/scripted-model.js";
import { defineTool } from "../src/tools/tool.js";
import { runCli } from "./helpers.js";
import { post, toolResults } from "./support/http.js";
import { listen } from "./support/listen.js";

const root = realpathSync(mkdtempSync(join(tmpdir(), "agentloop-call-faults-")));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const servers: { close(): Promise<void> }[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

const REQUIRE_CALC = { approval: { require: ["calculator"] } };
const lines = (stdout: string) =>
  stdout
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line) as { type: string; [key: string]: unknown });

/** The tool results a request sent back, as "id=content", whatever the provider's wire format. */
function resultsOf(request: FakeRequest | undefined): string[] {
  const body = request?.body ?? {};
  if (Array.isArray(body.input))
    return body.input
      .filter((i: { type?: string }) => i.type === "function_call_output")
      .map((i: { call_id: string; output: string }) => `${i.call_id}=${i.output}`);
  const out: string[] = [];
  for (const m of body.messages ?? []) {
    if (m.role === "tool") out.push(`${m.tool_call_id}=${m.content}`);
    if (Array.isArray(m.content))
      for (const part of m.content)
        if (part.type === "tool_result") out.push(`${part.tool_use_id}=${part.content}`);
  }
  return out;
}

/** A workspace whose model first calls the calculator and the clock with one id `dup`, then answers. */
async function duplicateIds(provider: "openai" | "anthropic" | "openai-responses") {
  const dir = mkdtempSync(join(root, `${provider}-`));
  writeFileSync(join(dir, "agentloop.json"), JSON.stringify(REQUIRE_CALC));
  const calc = { id: "dup", name: "calculator" };
  const time = { id: "dup", name: "get_current_time" };
  let server: { url: string; requests: FakeRequest[]; close(): Promise<void> };
  let env: Record<string, string>;
  if (provider === "anthropic") {
    server = await startFakeAnthropicServer({
      respond: [
        {
          text: "Both.",
          toolCalls: [
            { ...calc, input: { expression: "6*7" } },
            { ...time, input: {} },
          ],
        },
        { text: "Done." },
      ],
    });
    env = { ANTHROPIC_BASE_URL: server.url.replace(/\/v1$/, ""), ANTHROPIC_API_KEY: "sk-ant-test" };
  } else {
    const toolCalls = [
      { ...calc, arguments: { expression: "6*7" } },
      { ...time, arguments: {} },
    ];
    const respond = [{ text: "Both.", toolCalls }, { text: "Done." }];
    server =
      provider === "openai"
        ? await startFakeOpenAIServer({ respond })
        : await startFakeResponsesServer({ respond });
    env = { OPENAI_BASE_URL: server.url, OPENAI_API_KEY: "sk-test" };
  }
  servers.push(server);
  const cli = (args: string[]) =>
    runCli(["run", "--provider", provider, "--model", "m", ...args], { cwd: dir, env });
  return { server, cli };
}

describe("two tool calls with one id", () => {
  for (const provider of ["openai", "anthropic", "openai-responses"] as const) {
    it(`${provider}: become two calls with their own ids; the session waits for one and --approve runs it, each once`, async () => {
      const { server, cli } = await duplicateIds(provider);
      const waiting = await cli(["--session", "s", "--json", "Compute and tell the time."]);
      expect(waiting.stderr).not.toContain("Cannot read");
      expect(waiting.code).toBe(8);
      const events = lines(waiting.stdout);
      expect(events.filter((e) => e.type === "tool_call").map((e) => [e.id, e.name])).toEqual([
        ["dup", "calculator"],
        ["dup_2", "get_current_time"],
      ]);
      expect(events.at(-1)).toMatchObject({
        stopReason: "approval_required",
        pendingApprovals: [{ id: "dup", name: "calculator" }],
      });

      const approved = await cli(["--session", "s", "--approve", "all"]);
      expect(approved).toMatchObject({ code: 0, stdout: "Done.\n", stderr: "" });
      expect(server.requests).toHaveLength(2);
      const results = resultsOf(server.requests[1]);
      expect(results).toEqual(["dup=42", expect.stringMatching(/^dup_2=\d{4}-/)]);
    });
  }
});

describe("two tool calls with one id, on the server", () => {
  it("/runs/{id}/approvals runs the waiting one; each call runs once", async () => {
    const ran: string[] = [];
    const tool = (name: string, needsApproval: boolean) =>
      defineTool({
        name,
        description: name,
        parameters: z.object({}),
        needsApproval,
        execute: () => {
          ran.push(name);
          return `${name} done`;
        },
      });
    const model = scriptedModel([
      {
        toolCalls: [
          { id: "same", name: "read_note", arguments: {} },
          { id: "same", name: "write_note", arguments: {} },
        ],
      },
      { text: "Saved." },
    ]);
    const agent = new Agent({ model, tools: [tool("read_note", false), tool("write_note", true)] });
    const { client, baseURL } = await listen({ agents: { notes: agent }, store: memoryStore() });
    const completion = await client.chat.completions.create({
      model: "notes",
      messages: [{ role: "user", content: "save" }],
    });
    expect((completion as unknown as { agentloop: unknown }).agentloop).toMatchObject({
      stopReason: "approval_required",
      pendingApprovals: [{ id: "same_2", name: "write_note" }],
    });
    const res = await post(`${baseURL}/runs/${completion.id}/approvals`, { approve: "all" });
    expect(res.status).toBe(200);
    expect(ran).toEqual(["read_note", "write_note"]);
    expect(toolResults(model.requests[1]?.messages ?? [])).toEqual([
      ["same", "read_note done", false],
      ["same_2", "write_note done", false],
    ]);
  });
});

/** Writes session `s` as an older agentloop stored it: `messages`, and a run `state` (without them). */
async function storeOld(dir: string, messages: Message[], state: Record<string, unknown>) {
  const store = await sqliteStore(join(dir, ".agentloop", "agentloop.db"));
  const handle = await store.acquire("s");
  const run = { runId: "run_old", status: state.status === "completed" ? "completed" : "waiting" } as const;
  await handle.checkpoint({
    messages,
    run: { ...run, stopReason: String(state.stopReason), state: state as Json },
  });
  await handle.release();
  await store.close();
}

describe("a session an older version stored", () => {
  it("with two calls of one id, one answered and one waiting for approval, continues with --approve", async () => {
    const dir = mkdtempSync(join(root, "old-dup-"));
    writeFileSync(join(dir, "agentloop.json"), JSON.stringify(REQUIRE_CALC));
    const messages: Message[] = [
      { role: "user", content: "Compute and tell the time." },
      {
        role: "assistant",
        content: "Both.",
        toolCalls: [
          { id: "dup", name: "get_current_time", arguments: "{}" },
          { id: "dup", name: "calculator", arguments: '{"expression":"6*7"}' },
        ],
      },
      { role: "tool", toolCallId: "dup", name: "get_current_time", content: "2026-01-01", isError: false },
    ];
    const { messages: _all, ...state } = newRunState("run_old", messages, "s", undefined, "m");
    await storeOld(dir, messages, {
      ...state,
      iteration: 1,
      status: "awaiting_approval",
      stopReason: "approval_required",
      pending: { assistant: 1, decisions: [], breaking: [] },
    });
    const server = await startFakeOpenAIServer({ respond: [{ text: "Done." }] });
    servers.push(server);
    const env = { OPENAI_BASE_URL: server.url, OPENAI_API_KEY: "sk-test" };
    const cli = (args: string[]) => runCli(["run", "--model", "m", ...args], { cwd: dir, env });

    const shown = await cli(["--session", "s", "again"]);
    expect(shown.code).toBe(2);
    expect(shown.stderr).toContain("waits for approval of dup_2 (calculator)");
    const approved = await cli(["--session", "s", "--approve", "dup_2"]);
    expect(approved).toMatchObject({ code: 0, stdout: "Done.\n", stderr: "" });
    expect(resultsOf(server.requests[0])).toEqual(["dup=2026-01-01", "dup_2=42"]);
    const wire = server.requests[0]?.body.messages[1];
    expect(wire.tool_calls.map((c: { id: string }) => c.id)).toEqual(["dup", "dup_2"]);
  });

  it("with arguments that are not JSON, sends {} for them and goes on", async () => {
    const dir = mkdtempSync(join(root, "old-args-"));
    const messages: Message[] = [
      { role: "user", content: "Compute." },
      {
        role: "assistant",
        content: "",
        toolCalls: [
          { id: "a", name: "calculator", arguments: "{" },
          { id: "b", name: "calculator", arguments: "56e83361274323" },
        ],
      },
      { role: "tool", toolCallId: "a", name: "calculator", content: "Invalid JSON", isError: true },
      { role: "tool", toolCallId: "b", name: "calculator", content: "Not an object", isError: true },
      { role: "assistant", content: "Sorry." },
    ];
    const { messages: _all, ...state } = newRunState("run_old", messages, "s", undefined, "m");
    await storeOld(dir, messages, {
      ...state,
      iteration: 2,
      status: "completed",
      stopReason: "final_answer",
      output: "Sorry.",
    });
    const server = await startFakeOpenAIServer({ respond: [{ text: "Fine." }] });
    servers.push(server);
    const env = { OPENAI_BASE_URL: server.url, OPENAI_API_KEY: "sk-test" };
    const next = await runCli(["run", "--model", "m", "--session", "s", "again"], { cwd: dir, env });
    expect(next).toMatchObject({ code: 0, stdout: "Fine.\n" });
    const calls = server.requests[0]?.body.messages[1].tool_calls;
    expect(calls.map((c: { function: { arguments: string } }) => c.function.arguments)).toEqual(["{}", "{}"]);
  });
});

describe("tool-call arguments that are not one JSON object", () => {
  it("go back as {} in the history; the error result quotes what came and says what is wrong", async () => {
    const server = await startFakeOpenAIServer({
      respond: [
        {
          toolCalls: [
            { id: "cut", name: "calculator", arguments: "{" },
            { id: "big", name: "calculator", arguments: "56e83361274323" },
            { id: "inf", name: "calculator", arguments: '{"expression":"1+1","scale":1e999}' },
            { id: "ok", name: "calculator", arguments: '{"expression":"2+2"}' },
          ],
          finishReason: "length",
        },
        { text: "Recovered." },
      ],
    });
    servers.push(server);
    const { calculator } = await import("../src/tools/builtin/calculator.js");
    const model = openAIChatModel({ model: "m", apiKey: "sk-test", baseURL: server.url, maxRetries: 0 });
    const result = await new Agent({ model, tools: [calculator] }).run("compute");
    expect(result.output).toBe("Recovered.");
    const sent = server.requests[1]?.body.messages;
    const assistant = sent.find((m: { role: string }) => m.role === "assistant");
    expect(
      assistant.tool_calls.map((c: { id: string; function: { arguments: string } }) => [
        c.id,
        c.function.arguments,
      ]),
    ).toEqual([
      ["cut", "{}"],
      ["big", "{}"],
      ["inf", "{}"],
      ["ok", '{"expression":"2+2"}'],
    ]);
    for (const call of assistant.tool_calls) expect(() => JSON.parse(call.function.arguments)).not.toThrow();
    const [cut, big, inf, ok] = sent.filter((m: { role: string }) => m.role === "tool");
    expect(cut.content).toMatch(
      /^Invalid JSON in the arguments of 'calculator' \("\{"\): .+ Send the arguments/,
    );
    expect(big.content).toBe("The arguments of 'calculator' must be a JSON object, not \"56e83361274323\".");
    expect(inf.content).toMatch(/hold a number too large to represent/);
    expect(ok.content).toBe("4");
    // The stored history is as sent: marked invalid, never to be sent back as they came.
    expect(result.messages[1]).toMatchObject({
      toolCalls: [
        { invalid: expect.any(String) },
        { invalid: expect.any(String) },
        { invalid: expect.any(String) },
        {},
      ],
    });
  });
});

describe("a history given to a run (the library's `history`, a client's messages on the server)", () => {
  it("with arguments that are not one JSON object sends {} for them", async () => {
    const server = await startFakeOpenAIServer({ respond: () => ({ text: "Next." }) });
    servers.push(server);
    const history: Message[] = [
      { role: "user", content: "compute" },
      {
        role: "assistant",
        content: "",
        toolCalls: [
          { id: "cut", name: "calculator", arguments: "{" },
          { id: "inf", name: "calculator", arguments: "1e999" },
        ],
      },
      { role: "tool", toolCallId: "cut", name: "calculator", content: "bad", isError: true },
      { role: "tool", toolCallId: "inf", name: "calculator", content: "bad", isError: true },
      { role: "assistant", content: "Sorry." },
    ];
    const model = openAIChatModel({ model: "m", apiKey: "sk-test", baseURL: server.url, maxRetries: 0 });
    const result = await new Agent({ model }).run("again", { history });
    expect(result.output).toBe("Next.");
    const assistant = server.requests[0]?.body.messages.find((m: { role: string }) => m.role === "assistant");
    expect(
      assistant.tool_calls.map((c: { function: { arguments: string } }) => c.function.arguments),
    ).toEqual(["{}", "{}"]);

    // The same history from a client of the server, as Responses items.
    const { client } = await listen({ agents: { a: new Agent({ model }) } });
    const answer = await client.responses.create({
      input: [
        { role: "user", content: "compute" },
        { type: "function_call", call_id: "big", name: "calculator", arguments: "56e83361274323" },
        { type: "function_call_output", call_id: "big", output: "bad" },
        { role: "user", content: "again" },
      ],
    });
    expect(answer.output_text).toBe("Next.");
    const sent = server.requests[1]?.body.messages.find((m: { role: string }) => m.role === "assistant");
    expect(sent.tool_calls[0].function.arguments).toBe("{}");
  });
});

describe("an empty reply", () => {
  it("ends final_answer with incomplete 'empty': the CLI warns, the library says so", async () => {
    const server = await startFakeOpenAIServer({ respond: () => ({ text: "" }) });
    servers.push(server);
    const env = { OPENAI_BASE_URL: server.url, OPENAI_API_KEY: "sk-test" };
    const run = await runCli(["run", "--model", "m", "hi"], { env, cwd: root });
    expect(run).toMatchObject({
      code: 0,
      stdout: "\n",
      stderr:
        "agentloop: warning: the model's reply was empty (finish reason stop): there is no answer; try again, or check the model and its server\n",
    });
    const json = await runCli(["run", "--model", "m", "--json", "hi"], { env, cwd: root });
    expect(lines(json.stdout).at(-1)).toMatchObject({ type: "turn_complete", incomplete: "empty" });

    const model = openAIChatModel({ model: "m", apiKey: "sk-test", baseURL: server.url, maxRetries: 0 });
    const result = await new Agent({ model }).run("hi");
    expect(result).toMatchObject({ stopReason: "final_answer", output: "", incomplete: "empty" });
    expect(result.steps[0]?.incomplete).toBe("empty");
    const answered = await startFakeOpenAIServer({ respond: [{ text: "Hello." }] });
    servers.push(answered);
    const ok = openAIChatModel({ model: "m", apiKey: "sk-test", baseURL: answered.url, maxRetries: 0 });
    expect((await new Agent({ model: ok }).run("hi")).incomplete).toBeUndefined();
  });
});
