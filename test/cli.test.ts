import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { startFakeAnthropicServer } from "../src/testing/fake-anthropic-server.js";
import {
  type FakeOpenAIServer,
  type FakeResponder,
  startFakeOpenAIServer,
} from "../src/testing/fake-openai-server.js";
import { interruptOnFirstRequest, runCli } from "./helpers.js";

const KEY = "sk-test-SECRET-0123456789abcdef";
let server: FakeOpenAIServer | undefined;

afterEach(async () => {
  await server?.close();
  server = undefined;
});

async function serve(respond: FakeResponder) {
  server = await startFakeOpenAIServer({ respond });
  return { OPENAI_BASE_URL: server.url, OPENAI_API_KEY: KEY };
}

interface WireMessage {
  role: string;
  content?: string;
  tool_call_id?: string;
}
const toolMessages = (index: number): WireMessage[] =>
  ((server?.requests[index]?.body.messages ?? []) as WireMessage[]).filter((m) => m.role === "tool");

describe("agentloop run against an OpenAI-compatible server", () => {
  it("answers without a tool in one model call", async () => {
    const env = await serve([{ text: "Paris is the capital of France." }]);
    const run = await runCli(["run", "What is the capital of France?"], { env });
    expect(run).toMatchObject({ code: 0, stdout: "Paris is the capital of France.\n", stderr: "" });
    expect(server?.requests).toHaveLength(1);
    const body = server?.requests[0]?.body;
    expect(body.model).toBe("gpt-4o-mini");
    expect(body.stream).toBe(true);
    expect(body.messages.at(-1)).toEqual({ role: "user", content: "What is the capital of France?" });
    expect(body.tools.map((t: { function: { name: string } }) => t.function.name)).toEqual([
      "calculator",
      "get_current_time",
      "convert_temperature",
    ]);
    expect(server?.requests[0]?.headers.authorization).toBe(`Bearer ${KEY}`);
  });

  it("uses the calculator for 157.09 * 493.89", async () => {
    const env = await serve([
      { toolCalls: [{ name: "calculator", arguments: { expression: "157.09 * 493.89" } }] },
      { text: "157.09 * 493.89 = 77585.1801" },
    ]);
    const run = await runCli(["run", "What is 157.09 * 493.89?"], { env });
    expect(run.code).toBe(0);
    expect(run.stdout).toBe("157.09 * 493.89 = 77585.1801\n");
    expect(toolMessages(1)).toEqual([{ role: "tool", tool_call_id: "call_0_0", content: "77585.1801" }]);
  });

  it("solves a several-step problem one tool call at a time", async () => {
    const env = await serve([
      {
        text: "First my mother's age.",
        toolCalls: [{ name: "calculator", arguments: { expression: "20 + 30" } }],
      },
      { toolCalls: [{ name: "calculator", arguments: { expression: "50 - 32" } }] },
      { text: "Your brother is 18." },
    ]);
    const prompt =
      "My brother is 32 years younger than my mother, my mother is 30 years older than me, I am 20. How old is my brother?";
    const run = await runCli(["run", "--verbose", prompt], { env });
    expect(run.code).toBe(0);
    expect(run.stdout).toBe("Your brother is 18.\n");
    expect(toolMessages(1).map((m) => m.content)).toEqual(["50"]);
    expect(toolMessages(2).map((m) => m.content)).toEqual(["50", "18"]);
    // Progress goes to stderr with --verbose: iterations and tool calls with durations.
    expect(run.stderr).toContain("iteration 3");
    expect(run.stderr).toMatch(/✓ calculator \(\d+ ms\) 18/);
    // And a closing line: the stop, iterations, tokens in and out, duration (the local model costs nothing).
    expect(run.stderr.split("\n").at(-2)).toMatch(
      /^agentloop: final_answer · 3 iterations · \d+ tokens in, \d+ out · [\d.]+ (ms|s) · \$0$/,
    );
  });

  it("prints the event stream as JSON lines with --json", async () => {
    const env = await serve([
      { toolCalls: [{ name: "calculator", arguments: { expression: "2^10" } }] },
      { text: "1024" },
    ]);
    const run = await runCli(["run", "--json", "2^10?"], { env });
    expect(run.code).toBe(0);
    const events = run.stdout
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line));
    const types = events.map((e) => e.type);
    expect(types[0]).toBe("iteration_start");
    expect(types.filter((t) => t === "turn_complete")).toHaveLength(1);
    expect(events.find((e) => e.type === "tool_call")).toMatchObject({
      name: "calculator",
      arguments: { expression: "2^10" },
    });
    expect(events.find((e) => e.type === "tool_result")).toMatchObject({ content: "1024", isError: false });
    expect(events.at(-1)).toMatchObject({
      type: "turn_complete",
      stopReason: "final_answer",
      iterations: 2,
      output: "1024",
    });
    expect(events.at(-1).usage.inputTokens).toBeGreaterThan(0);
  });

  it("stops at --max-iterations with exit 3", async () => {
    const env = await serve(() => ({
      text: "thinking...",
      toolCalls: [{ name: "calculator", arguments: { expression: "1+1" } }],
    }));
    const run = await runCli(["run", "--max-iterations", "2", "loop forever"], { env });
    expect(run.code).toBe(3);
    expect(run.stdout).toBe("thinking...\n");
    expect(run.stderr).toContain("max_iterations");
    expect(server?.requests).toHaveLength(2);
  });

  it("retries a 429 and succeeds", async () => {
    const env = await serve([{ status: 429, headers: { "retry-after-ms": "5" } }, { text: "ok" }]);
    const run = await runCli(["run", "hi"], { env });
    expect(run).toMatchObject({ code: 0, stdout: "ok\n" });
    expect(server?.requests).toHaveLength(2);
  });

  it("exits 5 after retries on a persistent 500, never showing the key", async () => {
    const body = JSON.stringify({
      error: { message: `Internal error for key ${KEY}`, type: "server_error" },
    });
    const env = await serve(() => ({ status: 500, headers: { "retry-after-ms": "5" }, body }));
    const run = await runCli(["run", "--verbose", "--json", "hi"], { env });
    expect(run.code).toBe(5);
    expect(server?.requests).toHaveLength(4);
    expect(run.stdout + run.stderr).not.toContain(KEY);
    expect(run.stdout + run.stderr).not.toContain("SECRET");
    const last = JSON.parse(run.stdout.trim().split("\n").at(-1) as string);
    expect(last).toMatchObject({ type: "turn_complete", stopReason: "model_error" });
  });

  it("does not retry a 400", async () => {
    const env = await serve([
      {
        status: 400,
        body: JSON.stringify({ error: { message: "bad request", type: "invalid_request_error" } }),
      },
    ]);
    const run = await runCli(["run", "hi"], { env });
    expect(run.code).toBe(5);
    expect(server?.requests).toHaveLength(1);
    expect(run.stderr).toContain("model_error");
    expect(run.stderr.trim().split("\n")).toHaveLength(1);
  });

  it("ends with model_error when the stream breaks off", async () => {
    const env = await serve(() => ({ breakOff: true, afterText: "Half an ans" }));
    const run = await runCli(["run", "hi"], { env });
    expect(run.code).toBe(5);
    expect(run.stderr).toMatch(/^agentloop: model_error: /);
  });

  it("aborts at --timeout with exit 130, naming the limit", async () => {
    const env = await serve(() => ({ stall: true, afterText: "Let me" }));
    const run = await runCli(["run", "--timeout", "0.3", "hi"], { env });
    expect(run.code).toBe(130);
    expect(run.stderr).toBe(
      "agentloop: aborted: stopped after the 0.3 s time limit (--timeout); raise --timeout to allow more\n",
    );
  });

  it("aborts on SIGINT with exit 130, a time limit set or not", async () => {
    for (const limit of [[], ["--timeout", "600"]]) {
      const env = await serve(() => ({ stall: true }));
      const run = await runCli(["run", ...limit, "hi"], {
        env,
        onSpawn: interruptOnFirstRequest(server as FakeOpenAIServer),
      });
      expect(run.code).toBe(130);
      expect(run.stderr).toBe("agentloop: aborted\n");
      await server?.close();
      server = undefined;
    }
  });

  it("applies flag > environment > config file > default", async () => {
    const env = await serve(() => ({ text: "ok" }));
    const dir = mkdtempSync(join(tmpdir(), "agentloop-"));
    writeFileSync(
      join(dir, "agentloop.json"),
      JSON.stringify({ model: "from-config", instructions: "Config says hi." }),
    );
    await runCli(["run", "hi"], { env, cwd: dir });
    await runCli(["run", "hi"], { env: { ...env, AGENTLOOP_MODEL: "from-env" }, cwd: dir });
    await runCli(["run", "--model", "from-flag", "--system", "Flag says hi.", "hi"], {
      env: { ...env, AGENTLOOP_MODEL: "from-env" },
      cwd: dir,
    });
    const bodies = server?.requests.map((r) => r.body) ?? [];
    expect(bodies.map((b) => b.model)).toEqual(["from-config", "from-env", "from-flag"]);
    expect(bodies.map((b) => b.messages[0])).toEqual([
      { role: "system", content: "Config says hi." },
      { role: "system", content: "Config says hi." },
      { role: "system", content: "Flag says hi." },
    ]);
  });

  it("offers no tools with --no-builtin-tools and reads the prompt from stdin", async () => {
    const env = await serve([{ text: "ok" }]);
    const run = await runCli(["run", "--no-builtin-tools"], { env, input: "piped task\n" });
    expect(run.code).toBe(0);
    expect(server?.requests[0]?.body.tools).toBeUndefined();
    expect(server?.requests[0]?.body.messages.at(-1)).toEqual({ role: "user", content: "piped task" });
  });
});

describe("agentloop usage errors", () => {
  const oneLine = (text: string) => text.trim().split("\n").length === 1;

  it.each([
    [["run", "--bogus", "hi"], /unknown option '--bogus'/],
    [["run", "--max-iterations", "abc", "hi"], /--max-iterations must be a positive integer/],
    [["run", "--mode", "sideways", "hi"], /--mode/],
    [["run"], /Missing prompt/],
    [["frobnicate"], /unknown command 'frobnicate'/],
  ])("%j exits 2 with one line", async (args, message) => {
    const run = await runCli(args, { env: { OPENAI_API_KEY: KEY } });
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(message);
    expect(oneLine(run.stderr)).toBe(true);
    expect(run.stderr).not.toContain("    at ");
  });

  it("asks for a key or a base URL when neither is set", async () => {
    const run = await runCli(["run", "hi"]);
    expect(run.code).toBe(2);
    expect(run.stderr).toBe(
      "agentloop: No API key: set OPENAI_API_KEY, or point --base-url (or OPENAI_BASE_URL) at an OpenAI-compatible server such as Ollama ('agentloop demo' runs without either).\n",
    );
  });

  it("names an unknown or mistyped config key", async () => {
    const dir = mkdtempSync(join(tmpdir(), "agentloop-"));
    writeFileSync(join(dir, "agentloop.json"), JSON.stringify({ model: "m", maxIteratons: 3 }));
    const unknown = await runCli(["run", "hi"], { cwd: dir, env: { OPENAI_API_KEY: KEY } });
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toBe(
      "agentloop: unknown key 'maxIteratons' in agentloop.json: did you mean 'maxIterations'?\n",
    );
    writeFileSync(join(dir, "bad.json"), JSON.stringify({ maxIterations: "ten" }));
    const typed = await runCli(["run", "--config", "bad.json", "hi"], {
      cwd: dir,
      env: { OPENAI_API_KEY: KEY },
    });
    expect(typed.code).toBe(2);
    expect(typed.stderr).toBe(
      "agentloop: 'maxIterations' in bad.json is invalid: expected number, received string.\n",
    );
    const missing = await runCli(["run", "--config", "nope.json", "hi"], {
      cwd: dir,
      env: { OPENAI_API_KEY: KEY },
    });
    expect(missing.stderr).toBe("agentloop: Config file not found: nope.json. Check the --config path.\n");
  });

  it("lists the built-in tools", async () => {
    const run = await runCli(["tools", "--json"]);
    expect(run.code).toBe(0);
    const tools = JSON.parse(run.stdout);
    expect(tools.map((t: { name: string }) => t.name)).toEqual([
      "calculator",
      "get_current_time",
      "convert_temperature",
    ]);
    expect(tools[0].parameters.properties.expression.type).toBe("string");
  });
});

describe("agentloop run termination", () => {
  it("ends with task_completion in explicit mode", async () => {
    const env = await serve([
      { text: "Let me think." },
      { toolCalls: [{ name: "task_completion", arguments: { result: "All done: 42." } }] },
    ]);
    const run = await runCli(["run", "--mode", "explicit", "do it"], { env });
    expect(run).toMatchObject({ code: 0, stdout: "All done: 42.\n" });
    const names = server?.requests[0]?.body.tools.map((t: { function: { name: string } }) => t.function.name);
    expect(names).toEqual([
      "calculator",
      "get_current_time",
      "convert_temperature",
      "task_completion",
      "ask_question",
      "converse",
    ]);
    expect(server?.requests[1]?.body.messages.at(-1).content).toContain("use task_completion when done");
  });

  it("prints the question and exits 6 on ask_question", async () => {
    const env = await serve([
      { toolCalls: [{ name: "ask_question", arguments: { question: "Which city do you mean?" } }] },
    ]);
    const run = await runCli(["run", "--mode", "explicit", "weather?"], { env });
    expect(run.code).toBe(6);
    expect(run.stdout).toBe("Which city do you mean?\n");
    expect(run.stderr).toContain("asked a question");
  });

  it("exits 4 when the circuit breaker trips", async () => {
    const env = await serve(() => ({
      toolCalls: [{ name: "calculator", arguments: { expression: "1/0" } }],
    }));
    const run = await runCli(["run", "divide by zero"], { env });
    expect(run.code).toBe(4);
    expect(run.stderr).toBe(
      'agentloop: circuit_breaker: The same error repeated 3 times in a row: calculator({"expression":"1/0"}) -> Division by zero at position 2\n',
    );
  });

  it("speaks the XML tool protocol with --tool-protocol xml", async () => {
    const block =
      '<tool>{"server_name": "local", "tool_name": "calculator", "arguments": {"expression": "6*7"}}</tool>';
    const env = await serve([{ text: `Computing. ${block}` }, { text: "It is 42." }]);
    const run = await runCli(["run", "--tool-protocol", "xml", "--json", "6*7?"], { env });
    expect(run.code).toBe(0);
    const first = server?.requests[0]?.body;
    expect(first.tools).toBeUndefined();
    expect(first.messages[0].content).toContain('"tool_name"');
    expect(first.messages[0].content).toContain("calculator");
    expect(server?.requests[1]?.body.messages.at(-1)).toEqual({
      role: "user",
      content: "Tool 'calculator' result:\n42",
    });
    const events = run.stdout
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line));
    const text = events
      .filter((e) => e.type === "message_delta")
      .map((e) => e.text)
      .join("");
    expect(text).not.toContain("<tool>");
    expect(events.at(-1)).toMatchObject({ type: "turn_complete", output: "It is 42." });
  });

  it("exits 7 when the token budget is spent", async () => {
    const env = await serve((_request, index) => ({
      text: "working",
      toolCalls: [{ name: "calculator", arguments: { expression: `${index} + 1` } }],
      usage: { inputTokens: 400, outputTokens: 100 },
    }));
    const run = await runCli(["run", "--token-budget", "1000", "go"], { env });
    expect(run.code).toBe(7);
    expect(run.stderr).toBe("agentloop: budget_exceeded: Token budget spent: 1000 of 1000 tokens.\n");
    expect(server?.requests).toHaveLength(2);
  });

  it("keeps every request under --max-context-tokens over 30 iterations, never orphaning a tool result", async () => {
    const filler = "I am carefully working through this long task, one small calculation at a time. ".repeat(
      8,
    );
    const env = await serve((_request, index) =>
      index < 29
        ? {
            text: `Step ${index + 1}. ${filler}`,
            toolCalls: [{ name: "calculator", arguments: { expression: `${index} + 1` } }],
          }
        : { text: "All 30 steps done." },
    );
    const run = await runCli(
      [
        "run",
        "--system",
        "You count.",
        "--max-iterations",
        "30",
        "--max-context-tokens",
        "3000",
        "Count to thirty.",
      ],
      { env },
    );
    expect(run.code).toBe(0);
    expect(run.stdout).toBe("All 30 steps done.\n");
    const requests = server?.requests ?? [];
    expect(requests).toHaveLength(30);
    const { tokenCounterFor } = await import("../src/memory/tokens.js");
    const counter = tokenCounterFor("gpt-4o-mini");
    let pruned = 0;
    for (const { body } of requests) {
      const messages = body.messages as (WireMessage & { tool_calls?: { id: string }[] })[];
      // The system prompt and the task always lead.
      expect(messages[1]).toEqual({ role: "user", content: "Count to thirty." });
      if (messages.some((m) => m.role === "user" && m.content?.includes("earlier messages omitted")))
        pruned++;
      // Every tool result has its call in the same request, and every call has its result.
      const calls = new Set(messages.flatMap((m) => m.tool_calls?.map((c) => c.id) ?? []));
      const results = new Set(messages.filter((m) => m.role === "tool").map((m) => m.tool_call_id));
      expect([...results].every((id) => calls.has(id as string))).toBe(true);
      expect([...calls].every((id) => results.has(id))).toBe(true);
      // Under the budget, counted the way providers bill a chat request: content plus a few tokens a message.
      const calls_ = messages.flatMap(
        (m) => (m.tool_calls ?? []) as { function?: { name: string; arguments: string } }[],
      );
      const tokens =
        messages.reduce((sum, m) => sum + counter.count(m.content ?? "") + 4, 0) +
        calls_.reduce((sum, c) => sum + counter.count(`${c.function?.name}${c.function?.arguments}`), 0) +
        counter.count(JSON.stringify(body.tools));
      expect(tokens).toBeLessThan(3000);
    }
    expect(pruned).toBeGreaterThan(10);
  });

  it("talks to Anthropic with --provider anthropic", async () => {
    const fake = await startFakeAnthropicServer({
      respond: [
        {
          thinking: "Use the calculator.",
          signature: "sig-1",
          toolCalls: [{ id: "toolu_1", name: "calculator", input: { expression: "157.09 * 493.89" } }],
        },
        { text: "157.09 * 493.89 = 77585.1801" },
      ],
    });
    try {
      const env = { ANTHROPIC_BASE_URL: fake.url, ANTHROPIC_API_KEY: "sk-ant-SECRET-key" };
      const run = await runCli(
        ["run", "--provider", "anthropic", "--system", "Be exact.", "157.09 * 493.89?"],
        { env },
      );
      expect(run).toMatchObject({ code: 0, stdout: "157.09 * 493.89 = 77585.1801\n" });
      const second = fake.requests[1]?.body;
      expect(second.system).toBe("Be exact.");
      expect(second.model).toBe("claude-sonnet-5-5");
      expect(second.messages.at(-2).content[0]).toMatchObject({ type: "thinking", signature: "sig-1" });
      expect(second.messages.at(-1).content).toEqual([
        { type: "tool_result", tool_use_id: "toolu_1", content: "77585.1801" },
      ]);
      expect(run.stderr).not.toContain("SECRET");
    } finally {
      await fake.close();
    }
  });

  it("talks to an Azure OpenAI or AI DIAL deployment configured in agentloop.json", async () => {
    const env = await serve([{ text: "hello from the deployment" }]);
    const dir = mkdtempSync(join(tmpdir(), "agentloop-"));
    writeFileSync(
      join(dir, "agentloop.json"),
      JSON.stringify({ azure: { apiVersion: "2024-10-21", deployment: "gpt-4o" } }),
    );
    const origin = (env.OPENAI_BASE_URL as string).replace(/\/v1$/, "");
    const run = await runCli(["run", "hi"], {
      cwd: dir,
      env: { OPENAI_BASE_URL: origin, OPENAI_API_KEY: KEY },
    });
    expect(run).toMatchObject({ stderr: "", code: 0, stdout: "hello from the deployment\n" });
    const request = server?.requests[0];
    expect(request?.path).toBe("/openai/deployments/gpt-4o/chat/completions");
    expect(request?.query?.["api-version"]).toBe("2024-10-21");
    expect(request?.headers["api-key"]).toBe(KEY);
    expect(request?.headers.authorization).toBeUndefined();
  });
});
