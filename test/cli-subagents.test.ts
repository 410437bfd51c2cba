// Sub-agents from the CLI (SPEC section 10): config "agents", progress under the delegating call,
// approvals of a child's calls (asked in a terminal, or waited for and continued with --approve),
// the tree's budget (exit 7), and bad config (exit 2). Real `agentloop` processes against the fake
// OpenAI server, which tells the runs apart by their system prompt.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { startFakeAnthropicServer } from "../src/testing/fake-anthropic-server.js";
import {
  type FakeOpenAIServer,
  type FakeReply,
  startFakeOpenAIServer,
} from "../src/testing/fake-openai-server.js";
import { runCli } from "./helpers.js";
import { terminal } from "./support/terminal.js";

const root = mkdtempSync(join(tmpdir(), "agentloop-sub-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let server: FakeOpenAIServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

interface Message {
  role: string;
  content: string;
}
type Script = (replies: number, messages: Message[]) => FakeReply;

/** A folder with `config`, and a fake model answering the top level with `top` and the researcher with `child`. */
async function workspace(config: object, top: Script, child: Script) {
  const dir = mkdtempSync(join(root, "w-"));
  writeFileSync(
    join(dir, "agentloop.json"),
    JSON.stringify({
      instructions: "You coordinate.",
      agents: {
        researcher: {
          description: "Finds facts.",
          instructions: "You research.",
          model: "cheap-model",
          tools: ["calculator"],
        },
      },
      ...config,
    }),
  );
  server = await startFakeOpenAIServer({
    respond: (request) => {
      const messages = request.body.messages as Message[];
      const system = messages.find((m) => m.role === "system")?.content ?? "";
      const replies = messages.filter((m) => m.role === "assistant").length;
      return system.includes("You research.") ? child(replies, messages) : top(replies, messages);
    },
  });
  const env = { OPENAI_BASE_URL: server.url, OPENAI_API_KEY: "sk-test", AGENTLOOP_DB: join(dir, "s.db") };
  return {
    dir,
    env,
    server,
    cli: (args: string[]) => runCli(args, { cwd: dir, env }),
    models: () => (server?.requests ?? []).map((r) => String(r.body.model)),
  };
}

const delegate = {
  toolCalls: [{ id: "d1", name: "delegate_task", arguments: { agent: "researcher", task: "Compute 6*7" } }],
};
const topScript: Script = (replies, messages) =>
  replies === 0 ? delegate : { text: `Researcher: ${messages.at(-1)?.content}` };
const childScript: Script = (replies) =>
  replies === 0
    ? { toolCalls: [{ id: "c1", name: "calculator", arguments: { expression: "6*7" } }] }
    : { text: "It is 42." };

describe("agentloop run with sub-agents", () => {
  it("delegates to the configured agent with its own model; progress shows its work indented under the call, named", async () => {
    const w = await workspace({}, topScript, childScript);
    const run = await w.cli(["run", "--verbose", "What is 6*7?"]);
    expect(run.code).toBe(0);
    expect(run.stdout).toBe("Researcher: It is 42.\n");
    expect(w.models()).toEqual(["gpt-4o-mini", "cheap-model", "cheap-model", "gpt-4o-mini"]);
    const lines = run.stderr.split("\n");
    const call = lines.findIndex((l) => l.includes("→ delegate_task"));
    expect(lines.slice(call, call + 6)).toEqual([
      '  → delegate_task {"agent":"researcher","task":"Compute 6*7"}',
      "    researcher · iteration 1",
      '    researcher   → calculator {"expression":"6*7"}',
      expect.stringMatching(/^ {4}researcher {3}✓ calculator \(\d+ ms\) 42$/),
      "    researcher · iteration 2",
      expect.stringMatching(/^ {2}✓ delegate_task \(\d+ ms\) It is 42\.$/),
    ]);

    const json = await w.cli(["run", "--json", "What is 6*7?"]);
    const events = json.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    const ends = events.filter((e) => e.type === "turn_complete");
    expect(ends.map((e) => e.agent ?? "top")).toEqual(["researcher", "top"]);
    expect(ends[0]).toMatchObject({ parentCallId: "d1", depth: 1, parentRunId: ends[1]?.runId });
    expect(events.at(-1)).toBe(ends[1]);
    // The top-level usage includes the child's two model calls.
    const usage = (e: Record<string, unknown>) => (e.usage as { inputTokens: number }).inputTokens;
    expect(usage(ends[1] as Record<string, unknown>)).toBeGreaterThan(
      usage(ends[0] as Record<string, unknown>),
    );
  });

  it("runs a sub-agent on another provider, with that provider's key and base URL from the environment", async () => {
    const w = await workspace(
      {
        agents: {
          researcher: { description: "Finds facts.", provider: "anthropic", model: "claude-haiku-4-5" },
        },
      },
      topScript,
      childScript,
    );
    const anthropic = await startFakeAnthropicServer({ respond: () => ({ text: "Forty-two." }) });
    try {
      const run = await runCli(["run", "What is 6*7?"], {
        cwd: w.dir,
        env: { ...w.env, ANTHROPIC_BASE_URL: anthropic.url, ANTHROPIC_API_KEY: "sk-ant-test" },
      });
      expect(run.code).toBe(0);
      expect(run.stdout).toBe("Researcher: Forty-two.\n");
      expect(anthropic.requests.map((r) => r.body.model)).toEqual(["claude-haiku-4-5"]);
      expect(anthropic.requests[0]?.headers["x-api-key"]).toBe("sk-ant-test");
      expect(w.models()).toEqual(["gpt-4o-mini", "gpt-4o-mini"]);
    } finally {
      await anthropic.close();
    }
  });

  it("stops the child and the top-level run budget_exceeded (exit 7) when the child spends the tree's token budget", async () => {
    const w = await workspace(
      {},
      (replies) =>
        replies === 0 ? { ...delegate, usage: { inputTokens: 50, outputTokens: 0 } } : { text: "never" },
      () => ({
        toolCalls: [{ id: "c1", name: "calculator", arguments: { expression: "1+1" } }],
        usage: { inputTokens: 60, outputTokens: 0 },
      }),
    );
    const run = await w.cli(["run", "--json", "--token-budget", "100", "Spend."]);
    expect(run.code).toBe(7);
    const events = run.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    const ends = events.filter((e) => e.type === "turn_complete");
    expect(ends.map((e) => [e.agent ?? "top", e.stopReason])).toEqual([
      ["researcher", "budget_exceeded"],
      ["top", "budget_exceeded"],
    ]);
    // One model call each: nothing was asked once the budget was spent.
    expect(w.models()).toHaveLength(2);
  });

  it("without a terminal, a child's call that needs approval stops the top-level run (exit 8); --approve continues the child, then its parent", async () => {
    const w = await workspace({ approval: { require: ["calculator"] } }, topScript, childScript);
    const first = await w.cli(["run", "--session", "s", "--json", "What is 6*7?"]);
    expect(first.code).toBe(8);
    const events = first.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    const last = events.at(-1) as Record<string, unknown>;
    const child = events.find((e) => e.type === "turn_complete" && e.agent === "researcher");
    expect(child).toMatchObject({ stopReason: "approval_required" });
    expect(last).toMatchObject({
      type: "turn_complete",
      stopReason: "approval_required",
      pendingApprovals: [
        {
          id: "c1",
          name: "calculator",
          arguments: { expression: "6*7" },
          agent: "researcher",
          runId: child?.runId,
        },
      ],
    });
    expect(last.parentRunId).toBeUndefined();
    expect(first.stderr).toContain("1 call waits for approval: c1 (researcher: calculator)");
    expect(first.stderr).toContain("agentloop run --session s --approve c1");
    // Nothing waiting ran: the child's model was asked once.
    expect(w.models()).toEqual(["gpt-4o-mini", "cheap-model"]);

    const sessions = await w.cli(["sessions", "--json"]);
    expect(JSON.parse(sessions.stdout)[0]).toMatchObject({ status: "waiting" });
    const bad = await w.cli(["run", "--session", "s", "--approve", "d1"]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("waiting: c1 (calculator)");

    const second = await w.cli(["run", "--session", "s", "--approve", "c1"]);
    expect(second.code).toBe(0);
    expect(second.stdout).toBe("Researcher: It is 42.\n");
    // The child went on from its waiting call (asked once more), then its parent.
    expect(w.models()).toEqual(["gpt-4o-mini", "cheap-model", "cheap-model", "gpt-4o-mini"]);
    const childRequest = w.server.requests[2]?.body.messages as { role: string; content: string }[];
    expect(childRequest.filter((m) => m.role === "tool").map((m) => m.content)).toEqual(["42"]);
  });

  it("in a terminal, the prompt names the sub-agent whose call it is", async () => {
    const w = await workspace({ approval: { require: ["calculator"] } }, topScript, childScript);
    const run = terminal(["run", "What is 6*7?"], { cwd: w.dir, env: w.env });
    await run.waitFor("[a]lways allow calculator: ");
    expect(run.output).toMatch(/researcher.* \(sub-agent\): .*calculator.* wants to run .*\(c1\)/);
    run.type("y");
    expect(await run.exited).toBe(0);
    expect(run.output).toContain("Researcher: It is 42.");
  });

  it("refuses bad agent config with one line naming the key (exit 2)", async () => {
    const cases: [object, RegExp][] = [
      [{ agents: { "a b": { description: "x" } } }, /'agents\.a b'.*not a valid agent name/],
      [{ agents: { r: { instructions: "x" } } }, /'agents\.r\.description'.*is required/],
      [
        { agents: { r: { description: "x", modle: "m" } } },
        /unknown key 'agents\.r\.modle'.*did you mean 'model'/,
      ],
      [
        { agents: { r: { description: "x", agents: ["ghost"] } } },
        /'agents\.r\.agents'.*'ghost', which is not configured/,
      ],
      [{ agents: { calculator: { description: "x" } } }, /'agents\.calculator'.*has the name of a tool/],
      [
        { agents: { delegate_task: { description: "x" } } },
        /'agents\.delegate_task'.*has the name of a tool/,
      ],
      [{ maxDepth: 0, agents: { r: { description: "x" } } }, /'maxDepth'.*invalid/],
      [{ maxDepth: 11, agents: { r: { description: "x" } } }, /'maxDepth'.*invalid/],
    ];
    const w = await workspace({}, topScript, childScript);
    for (const [config, message] of cases) {
      writeFileSync(join(w.dir, "agentloop.json"), JSON.stringify(config));
      const run = await w.cli(["run", "hi"]);
      expect(run.code, JSON.stringify(config)).toBe(2);
      expect(run.stderr).toMatch(message);
      expect(run.stderr.trim().split("\n")).toHaveLength(1);
    }
    writeFileSync(
      join(w.dir, "agentloop.json"),
      JSON.stringify({ agents: { r: { description: "x", tools: ["calcu*", "nothing_*"] } } }),
    );
    const warned = await w.cli(["run", "hi"]);
    expect(warned.stderr).toContain(
      "'agents.r.tools' in agentloop.json names 'nothing_*', which matches no tool",
    );
    expect(warned.stderr).not.toContain("'calcu*'");
  });
});
