// `agentloop run --record` and `--replay` (SPEC section 12) as a user runs them: a run recorded
// against the fake servers, replayed with the servers closed, MCP servers not started with
// --replay-tools, a changed request explained, bad files in one line.
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { startFakeAnthropicServer } from "../src/testing/fake-anthropic-server.js";
import { startFakeOpenAIServer } from "../src/testing/fake-openai-server.js";
import { runCli } from "./helpers.js";

const EVERYTHING = fileURLToPath(
  new URL("../node_modules/@modelcontextprotocol/server-everything/dist/index.js", import.meta.url),
);

function workspace(config: object = {}): string {
  const dir = mkdtempSync(join(tmpdir(), "agentloop-record-cli-"));
  writeFileSync(join(dir, "agentloop.json"), JSON.stringify(config));
  return dir;
}

/** The JSON events of a `--json` run, without what differs from run to run. */
function events(stdout: string): unknown[] {
  return stdout
    .trim()
    .split("\n")
    .map((line) => {
      const { runId: _r, durationMs: _d, state: _s, ...rest } = JSON.parse(line) as Record<string, unknown>;
      return rest;
    });
}

const env = (url: string, key = "sk-live-abcdef123456") => ({
  PATH: process.env.PATH ?? "",
  OPENAI_BASE_URL: url,
  OPENAI_API_KEY: key,
});

describe("agentloop run --record / --replay", () => {
  it("replays a recorded run with the server gone: the same events, the prompt taken from the recording; no key in the file", async () => {
    const dir = workspace();
    const server = await startFakeOpenAIServer({
      respond: [
        {
          text: "Computing.",
          toolCalls: [{ id: "c1", name: "calculator", arguments: { expression: "6*7" } }],
        },
        { text: "It is 42." },
      ],
    });
    const live = await runCli(["run", "--json", "--record", "run.jsonl", "What is 6*7?"], {
      env: env(server.url),
      cwd: dir,
    });
    await server.close();
    expect(live.code).toBe(0);
    const file = readFileSync(join(dir, "run.jsonl"), "utf8");
    expect(file).not.toContain("abcdef123456");
    expect(
      file
        .trim()
        .split("\n")
        .map((l) => (JSON.parse(l) as { type: string }).type),
    ).toEqual(["header", "model", "tool", "model"]);
    // The server is gone: the recording answers (the same key, so the same secrets are held back
    // from the stream's deltas as they were live).
    const replayed = await runCli(["run", "--json", "--replay", "run.jsonl"], {
      env: env("http://127.0.0.1:9/v1"),
      cwd: dir,
    });
    expect(replayed.stderr).toBe("");
    expect(replayed.code).toBe(0);
    expect(events(replayed.stdout)).toEqual(events(live.stdout));
  });

  it("a changed request stops with model_error replay_mismatch (exit 5) and a diff on stderr; --replay-lenient takes the recording", async () => {
    const dir = workspace();
    const server = await startFakeOpenAIServer({ respond: [{ text: "Hello." }] });
    await runCli(["run", "--record", "run.jsonl", "--system", "Be brief.", "Hi"], {
      env: env(server.url),
      cwd: dir,
    });
    await server.close();
    const changed = await runCli(["run", "--replay", "run.jsonl", "--system", "Be very brief.", "Hi"], {
      env: { PATH: process.env.PATH ?? "" },
      cwd: dir,
    });
    expect(changed.code).toBe(5);
    expect(changed.stderr).toContain("model request 1 differs from the recording:");
    expect(changed.stderr).toContain('recorded: "Be brief."');
    expect(changed.stderr).toContain('now:      "Be very brief."');
    expect(changed.stderr).toContain("model_error");
    const lenient = await runCli(
      ["run", "--replay", "run.jsonl", "--replay-lenient", "--system", "Be very brief.", "Hi"],
      { env: { PATH: process.env.PATH ?? "" }, cwd: dir },
    );
    expect(lenient.code).toBe(0);
    expect(lenient.stdout.trim()).toBe("Hello.");
  });

  it("--replay-tools answers an MCP server's calls from the recording: the server is not started", async () => {
    const echo = { command: process.execPath, args: [EVERYTHING, "stdio"] };
    const dir = workspace({ mcpServers: { everything: echo } });
    const server = await startFakeOpenAIServer({
      respond: (request) => {
        const messages = request.body.messages as { role: string; content?: string }[];
        const tool = messages.find((m) => m.role === "tool");
        return tool
          ? { text: `Echoed: ${tool.content}` }
          : { toolCalls: [{ id: "e1", name: "everything__echo", arguments: { message: "ping" } }] };
      },
    });
    const live = await runCli(["run", "--json", "--record", "run.jsonl", "Echo ping."], {
      env: env(server.url),
      cwd: dir,
    });
    await server.close();
    expect(live.code).toBe(0);
    // The MCP server can no longer start: replaying its calls needs none.
    writeFileSync(
      join(dir, "agentloop.json"),
      JSON.stringify({ mcpServers: { everything: { command: "/nonexistent/mcp-server" } } }),
    );
    const replayed = await runCli(["run", "--json", "--replay", "run.jsonl", "--replay-tools"], {
      env: { PATH: process.env.PATH ?? "" },
      cwd: dir,
    });
    expect(replayed.code).toBe(0);
    expect(events(replayed.stdout)).toEqual(events(live.stdout));
  });

  it("an Anthropic recording replays with --provider anthropic, and names both providers without it", async () => {
    const dir = workspace();
    const server = await startFakeAnthropicServer({ respond: [{ text: "Bonjour." }] });
    const recorded = await runCli(
      ["run", "--provider", "anthropic", "--record", "run.jsonl", "Say hello in French."],
      {
        env: {
          PATH: process.env.PATH ?? "",
          ANTHROPIC_BASE_URL: server.url,
          ANTHROPIC_API_KEY: "sk-ant-secret-99",
        },
        cwd: dir,
      },
    );
    await server.close();
    expect(recorded.code).toBe(0);
    expect(readFileSync(join(dir, "run.jsonl"), "utf8")).not.toContain("secret-99");
    const wrong = await runCli(["run", "--replay", "run.jsonl"], {
      env: { PATH: process.env.PATH ?? "" },
      cwd: dir,
    });
    expect(wrong.code).toBe(2);
    expect(wrong.stderr.trim()).toBe(
      "agentloop: run.jsonl was recorded with provider anthropic, but the provider configured is openai: pass --provider anthropic to replay it.",
    );
    const right = await runCli(["run", "--provider", "anthropic", "--replay", "run.jsonl"], {
      env: { PATH: process.env.PATH ?? "" },
      cwd: dir,
    });
    expect(right.code).toBe(0);
    expect(right.stdout.trim()).toBe("Bonjour.");
  });

  it("bad input is one line and exit 2: not a recording, newer, cut off, unwritable, a flag without --replay", async () => {
    const dir = workspace();
    writeFileSync(join(dir, "notes.txt"), "hello\n");
    writeFileSync(join(dir, "new.jsonl"), '{"type":"header","format":"agentloop-recording","version":2}\n');
    writeFileSync(
      join(dir, "cut.jsonl"),
      '{"type":"header","format":"agentloop-recording","version":1}\n{"ty',
    );
    const cases: [string[], RegExp][] = [
      [["run", "--replay", "notes.txt"], /notes\.txt is not an agentloop recording/],
      [["run", "--replay", "new.jsonl"], /format version 2, newer than this agentloop reads \(1\): upgrade/],
      [["run", "--replay", "cut.jsonl"], /cut off mid-line/],
      [
        ["run", "--record", "no/such/dir/run.jsonl", "hi"],
        /Cannot write the recording no\/such\/dir\/run\.jsonl \(ENOENT\)/,
      ],
      [["run", "--replay-tools", "hi"], /--replay-tools goes with --replay <file>/],
    ];
    for (const [args, message] of cases) {
      const run = await runCli(args, {
        env: { PATH: process.env.PATH ?? "", OPENAI_API_KEY: "sk-x" },
        cwd: dir,
      });
      expect(run.code, args.join(" ")).toBe(2);
      expect(run.stderr.trim().split("\n"), args.join(" ")).toHaveLength(1);
      expect(run.stderr).toMatch(message);
    }
  });
});
