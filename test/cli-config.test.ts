// Settings through the built CLI (run `npm run build` first): base URLs, time limits, config
// files that are odd or huge, pasted MCP entries, prices, and the wording of usage errors.
import { execFileSync, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import {
  type FakeOpenAIServer,
  type FakeResponder,
  startFakeOpenAIServer,
} from "../src/testing/fake-openai-server.js";
import { CLI, type CliRun, runCli } from "./helpers.js";

const KEY = "sk-test-0123456789";
const USERS_SERVER = fileURLToPath(new URL("../examples/users-server/server.mjs", import.meta.url));
let server: FakeOpenAIServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

async function fake(respond: FakeResponder) {
  server = await startFakeOpenAIServer({ respond });
  return { OPENAI_BASE_URL: server.url, OPENAI_API_KEY: KEY };
}

/** A temp folder holding `files` (objects are written as JSON). */
function folder(files: Record<string, unknown> = {}): string {
  const dir = mkdtempSync(join(tmpdir(), "agentloop-config-"));
  for (const [name, content] of Object.entries(files)) {
    writeFileSync(join(dir, name), typeof content === "string" ? content : JSON.stringify(content));
  }
  return dir;
}

/** Exit 2 and exactly `line` on stderr, nothing on stdout. */
function usageError(run: CliRun, line: string | RegExp) {
  expect(run.code).toBe(2);
  expect(run.stdout).toBe("");
  if (typeof line === "string") expect(run.stderr).toBe(`${line}\n`);
  else {
    expect(run.stderr).toMatch(line);
    expect(run.stderr.trim().split("\n")).toHaveLength(1);
  }
}

describe("base URLs", () => {
  it.each([
    [
      ["--base-url", "localhost:11434/v1"],
      {},
      "agentloop: Invalid base URL 'localhost:11434/v1' (--base-url): give the full http:// or https:// form, e.g. http://localhost:11434/v1.",
    ],
    [["--base-url", "not-a-url"], {}, /^agentloop: Invalid base URL 'not-a-url' \(--base-url\): .*http:\/\//],
    [
      [],
      { OPENAI_BASE_URL: "127.0.0.1:8080/v1" },
      /\(OPENAI_BASE_URL\): .*e\.g\. http:\/\/127\.0\.0\.1:8080\/v1\.\n/,
    ],
    [
      ["--provider", "anthropic"],
      { ANTHROPIC_BASE_URL: "api.anthropic.com" },
      /^agentloop: Invalid base URL 'api.anthropic.com' \(ANTHROPIC_BASE_URL\)/,
    ],
  ])("%j %j is a usage error naming the http:// form", async (args, env, line) => {
    const run = await runCli(["run", ...args, "hi"], { env: { OPENAI_API_KEY: KEY, ...env } });
    usageError(run, line);
  });

  it("names the config file when its baseUrl is not a URL", async () => {
    const dir = folder({ "agentloop.json": { baseUrl: "localhost:11434/v1" } });
    const run = await runCli(["run", "hi"], { cwd: dir, env: { OPENAI_API_KEY: KEY } });
    usageError(run, /^agentloop: Invalid base URL 'localhost:11434\/v1' \("baseUrl" in agentloop.json\)/);
  });
});

describe("--timeout", () => {
  it("accepts a limit beyond the longest timer and finishes the run", async () => {
    const env = await fake(() => ({ text: "done in time" }));
    for (const seconds of ["2147484", "1e300"]) {
      const run = await runCli(["run", "--timeout", seconds, "hi"], { env });
      expect(run).toMatchObject({ code: 0, stdout: "done in time\n", stderr: "" });
    }
  });

  it("accepts a limit under a millisecond and aborts at it", async () => {
    const env = await fake(() => ({ stall: true }));
    const run = await runCli(["run", "--timeout", "0.0000001", "hi"], { env });
    expect(run.code).toBe(130);
    // The limit is named (a person's Ctrl+C says "aborted").
    expect(run.stderr).toBe(
      "agentloop: aborted: stopped after the 0.001 s time limit (--timeout); raise --timeout to allow more\n",
    );
  });
});

describe("config files", () => {
  it("refuses a file over 1 MiB, /dev/zero included, in one line", async () => {
    const dir = folder({ "big.json": `{"model": "m", "instructions": "${"x".repeat(1024 * 1024)}"}` });
    for (const file of ["big.json", "/dev/zero"]) {
      const run = await runCli(["run", "--config", file, "hi"], { cwd: dir, env: { OPENAI_API_KEY: KEY } });
      usageError(
        run,
        `agentloop: ${file} is larger than 1 MiB, the limit for a config file: check the --config path.`,
      );
    }
  });

  it("refuses a server or model named __proto__ instead of dropping it silently", async () => {
    const text = '{"mcpServers": {"__proto__": {"command": "node"}}}';
    const run = await runCli(["tools"], { cwd: folder({ "agentloop.json": text }) });
    usageError(run, 'agentloop: agentloop.json uses "__proto__" as a name: rename it.');
  });

  it("reads a file that starts with a UTF-8 byte order mark", async () => {
    const env = await fake([{ text: "ok" }]);
    const dir = folder({ "agentloop.json": `\uFEFF${JSON.stringify({ model: "from-bom-file" })}` });
    const run = await runCli(["run", "hi"], { cwd: dir, env });
    expect(run).toMatchObject({ code: 0, stdout: "ok\n", stderr: "" });
    expect(server?.requests[0]?.body.model).toBe("from-bom-file");
  });

  it("names a directory, an empty file and a FIFO nobody writes to, without waiting", async () => {
    const dir = folder({ "empty.json": "" });
    mkdirSync(join(dir, "folder.json"));
    execFileSync("mkfifo", [join(dir, "fifo.json")]);
    const env = { OPENAI_API_KEY: KEY };
    usageError(
      await runCli(["run", "--config", "folder.json", "hi"], { cwd: dir, env }),
      "agentloop: folder.json is a directory: pass a JSON file.",
    );
    usageError(
      await runCli(["run", "hi"], { cwd: folder({ "agentloop.json": "  \n" }), env }),
      /agentloop.json is empty/,
    );
    usageError(
      await runCli(["run", "--config", "empty.json", "hi"], { cwd: dir, env }),
      /empty.json is empty/,
    );
    usageError(await runCli(["run", "--config", "fifo.json", "hi"], { cwd: dir, env }), /fifo.json is empty/);
  });

  it("reads a config from a pipe, as with --config <(...)", async () => {
    const env = await fake([{ text: "ok" }]);
    const config = JSON.stringify({ model: "from-a-pipe" });
    const run = await new Promise<number | null>((resolve) => {
      const child = spawn(
        "bash",
        ["-c", `exec "${process.execPath}" "${CLI}" run --config <(printf '%s' "$CONFIG") hi`],
        { env: { PATH: process.env.PATH ?? "", ...env, CONFIG: config }, stdio: "ignore" },
      );
      child.on("close", resolve);
    });
    expect(run).toBe(0);
    expect(server?.requests[0]?.body.model).toBe("from-a-pipe");
  });
});

describe("MCP entries pasted from Claude Desktop, Cursor and VS Code", () => {
  /** A users file only the `envFile` points the server to, and a model that searches it. */
  async function usersWorkspace(config: (dir: string) => unknown) {
    const dir = folder({
      "team.json": [{ id: "z1", name: "Zed Quill", email: "zed@example.com", company: "Nowhere" }],
    });
    writeFileSync(join(dir, ".env"), `# the users file\nUSERS_FILE=${join(dir, "team.json")}\n`);
    writeFileSync(join(dir, "agentloop.json"), JSON.stringify(config(dir)));
    const env = await fake([
      { toolCalls: [{ name: "search_users", arguments: { query: "zed" } }] },
      { text: "Found Zed." },
    ]);
    const run = await runCli(["run", "Find Zed."], { cwd: dir, env });
    const toolResult = server?.requests[1]?.body.messages.at(-1)?.content ?? "";
    return { run, toolResult, dir };
  }

  it("loads VS Code's mcp.json: servers, type, envFile, dev and inputs", async () => {
    const { run, toolResult, dir } = await usersWorkspace(() => ({
      inputs: [{ type: "promptString", id: "api-key", description: "API key", password: true }],
      servers: {
        users: {
          type: "stdio",
          command: process.execPath,
          args: [USERS_SERVER],
          env: { LOG_LEVEL: 2, UNSET_ME: null },
          // biome-ignore lint/suspicious/noTemplateCurlyInString: VS Code's own variable syntax
          envFile: "${workspaceFolder}/.env",
          dev: { watch: "src/**/*.ts" },
        },
      },
    }));
    expect(run.stdout).toBe("Found Zed.\n");
    expect(run.code).toBe(0);
    expect(toolResult).toContain("Zed Quill");
    expect(run.stderr).toContain(`agentloop: note: agentloop.json: "inputs"`);
    expect(run.stderr).toContain(
      "agentloop: note: agentloop.json: 'servers.users.dev' (VS Code's development mode) is ignored.",
    );
    // The notes are about the MCP servers, which `sessions` does not start: it does not repeat them.
    const sessions = await runCli(["sessions", "--json"], { cwd: dir });
    expect(sessions).toMatchObject({ code: 0, stderr: "" });
  });

  it("expands VS Code's variables in command, args, env and cwd, as VS Code does", async () => {
    const dir = folder({
      "team.json": [{ id: "z1", name: "Zed Quill", email: "zed@example.com", company: "Nowhere" }],
    });
    mkdirSync(join(dir, "run"));
    /* biome-ignore-start lint/suspicious/noTemplateCurlyInString: VS Code's own variable syntax */
    const users = {
      type: "stdio",
      command: "${env:NODE_FOR_MCP}",
      args: ["${env:USERS_SERVER_PATH}", "..${/}..${/}${workspaceFolderBasename}${pathSeparator}team.json"],
      env: { HOME_SEEN: "${userHome}", UNSET: "[${env:AGENTLOOP_NOT_SET}]" },
      cwd: "${workspaceFolder}/run",
    };
    /* biome-ignore-end lint/suspicious/noTemplateCurlyInString: VS Code's own variable syntax */
    writeFileSync(join(dir, "agentloop.json"), JSON.stringify({ servers: { users } }));
    const env = await fake([
      { toolCalls: [{ name: "search_users", arguments: { query: "zed" } }] },
      { text: "Found Zed." },
    ]);
    const run = await runCli(["run", "Find Zed."], {
      cwd: dir,
      env: { ...env, NODE_FOR_MCP: process.execPath, USERS_SERVER_PATH: USERS_SERVER },
    });
    expect(run).toMatchObject({ code: 0, stdout: "Found Zed.\n", stderr: "" });
    expect(server?.requests[1]?.body.messages.at(-1)?.content).toContain("Zed Quill");
  });

  /* biome-ignore-start lint/suspicious/noTemplateCurlyInString: VS Code's own variable syntax */
  it("names a VS Code variable agentloop cannot fill in, such as ${input:…}", async () => {
    const entry = { command: "node", env: { API_KEY: "${input:api-key}" } };
    const run = await runCli(["tools"], { cwd: folder({ "agentloop.json": { servers: { gh: entry } } }) });
    usageError(
      run,
      "agentloop: 'servers.gh.env.API_KEY' in agentloop.json uses ${input:api-key}: agentloop shows no prompts: write the value in its place, or ${env:NAME} to read it from the environment.",
    );
    const file = { command: "node", args: ["--open", "${file}"] };
    usageError(
      await runCli(["tools"], { cwd: folder({ "agentloop.json": { servers: { ed: file } } }) }),
      "agentloop: 'servers.ed.args.1' in agentloop.json uses ${file}: only VS Code can fill it in: write the value in its place.",
    );
  });
  /* biome-ignore-end lint/suspicious/noTemplateCurlyInString: VS Code's own variable syntax */

  it("loads Cursor's and Claude Desktop's mcpServers, remote entries with auth included", async () => {
    const { run, toolResult } = await usersWorkspace(() => ({
      mcpServers: {
        users: { type: "stdio", command: process.execPath, args: [USERS_SERVER], envFile: ".env" },
        remote: {
          url: "http://127.0.0.1:9/mcp",
          headers: { "X-Api-Key": "k" },
          auth: { CLIENT_ID: "id", scopes: ["read"] },
          optional: true,
        },
      },
    }));
    expect(run).toMatchObject({ code: 0, stdout: "Found Zed.\n" });
    expect(toolResult).toContain("Zed Quill");
    expect(run.stderr).toContain("'mcpServers.remote.auth' (Cursor's OAuth settings) is ignored");
    expect(run.stderr).toMatch(/warning: .*remote/);
  });

  it.each([
    [
      { servers: { users: { command: "node", bogus: true } } },
      "agentloop: unknown key 'servers.users.bogus' in agentloop.json: remove it (docs/config.md lists every key).",
    ],
    [
      { mcpServers: { users: { command: "node", evn: {} } } },
      "agentloop: unknown key 'mcpServers.users.evn' in agentloop.json: did you mean 'env'?",
    ],
    [
      { mcpServers: { users: { args: ["x"] } } },
      `agentloop: 'mcpServers.users' in agentloop.json needs "command" (a local server) or "url" (a remote one).`,
    ],
    [
      { mcpServers: { remote: { url: "localhost:3001/mcp" } } },
      "agentloop: 'mcpServers.remote.url' in agentloop.json must be an http:// or https:// URL, got 'localhost:3001/mcp'.",
    ],
    [
      { mcpServers: { a: { command: "x", envFile: "missing.env" } } },
      "agentloop: Cannot read 'mcpServers.a.envFile' (missing.env) in agentloop.json: ENOENT.",
    ],
    // A key of the other kind of server is named as such, not as unknown.
    [
      { mcpServers: { s: { command: "x", oauth: { scope: "a" } } } },
      `agentloop: 'mcpServers.s.oauth' in agentloop.json applies only to remote servers (with a "url"); this one runs a "command": remove it.`,
    ],
    [
      { mcpServers: { s: { command: "x", headers: { "X-Key": "k" } } } },
      `agentloop: 'mcpServers.s.headers' in agentloop.json applies only to remote servers (with a "url"); this one runs a "command": remove it.`,
    ],
    [
      { mcpServers: { s: { url: "http://127.0.0.1:9/mcp", env: { A: "1" } } } },
      `agentloop: 'mcpServers.s.env' in agentloop.json applies only to local servers (with a "command"); this one is reached at a "url": remove it.`,
    ],
    [
      { mcpServers: { s: { url: "http://127.0.0.1:9/mcp", args: ["-y"] } } },
      `agentloop: 'mcpServers.s.args' in agentloop.json applies only to local servers (with a "command"); this one is reached at a "url": remove it.`,
    ],
    [
      { mcpServers: { s: { command: "x", url: "http://127.0.0.1:9/mcp" } } },
      `agentloop: 'mcpServers.s' in agentloop.json has both "command" and "url": keep "command" for a local server or "url" for a remote one.`,
    ],
  ])("rejects %j naming the key", async (config, line) => {
    const run = await runCli(["tools"], { cwd: folder({ "agentloop.json": config }) });
    usageError(run, line);
  });
});

describe("wording", () => {
  it("points an unknown option to the command's --help and keeps commander's suggestion", async () => {
    usageError(
      await runCli(["run", "--foo", "hi"]),
      "agentloop: unknown option '--foo'. See 'agentloop run --help'.",
    );
    usageError(
      await runCli(["chat", "--verbos"]),
      "agentloop: unknown option '--verbos' (did you mean --verbose?). See 'agentloop chat --help'.",
    );
    usageError(
      await runCli(["frobnicate"]),
      "agentloop: unknown command 'frobnicate'. See 'agentloop --help'.",
    );
  });

  it("suggests the key a misspelt config key meant, and lists unknown keys naturally", async () => {
    const env = { OPENAI_API_KEY: KEY };
    usageError(
      await runCli(["run", "hi"], { cwd: folder({ "agentloop.json": { maxIteration: 3 } }), env }),
      "agentloop: unknown key 'maxIteration' in agentloop.json: did you mean 'maxIterations'?",
    );
    usageError(
      await runCli(["run", "hi"], {
        cwd: folder({ "agentloop.json": { temperature: 1, apiKey: "x" } }),
        env,
      }),
      "agentloop: unknown keys 'temperature' and 'apiKey' in agentloop.json: remove them or fix their spelling.",
    );
    usageError(
      await runCli(["run", "hi"], {
        cwd: folder({ "agentloop.json": { tool_protocol: "xml", tempo: 1, x: 1 } }),
        env,
      }),
      "agentloop: unknown keys 'tool_protocol', 'tempo', and 'x' in agentloop.json: remove them or fix their spelling ('tool_protocol' → 'toolProtocol').",
    );
    usageError(
      await runCli(["run", "hi"], { env: { ...env, AGENTLOOP_PROVIDER: "gemini" } }),
      "agentloop: Invalid provider 'gemini' (AGENTLOOP_PROVIDER): use openai, openai-responses, or anthropic.",
    );
  });

  it("says 1 iteration, not 1 iterations", async () => {
    const env = await fake(() => ({ toolCalls: [{ name: "calculator", arguments: { expression: "1+1" } }] }));
    const run = await runCli(["run", "--max-iterations", "1", "go"], { env });
    expect(run.code).toBe(3);
    expect(run.stderr).toBe(
      "agentloop: stopped after 1 iteration (max_iterations); raise --max-iterations to allow more\n",
    );
  });

  it("prints money without exponent notation", async () => {
    const env = await fake(() => ({
      toolCalls: [{ name: "calculator", arguments: { expression: "1+1" } }],
      usage: { inputTokens: 400, outputTokens: 100 },
    }));
    // The fake server is local, so free unless priced: price it as gpt-4o-mini is.
    const prices = { "gpt-4o-mini": { input: 0.15, output: 0.6 } };
    const cwd = folder({ "agentloop.json": { prices } });
    const run = await runCli(["run", "--cost-budget", "0.0000001", "go"], { env, cwd });
    expect(run.code).toBe(7);
    // 400 × $0.15 + 100 × $0.60 per million tokens
    expect(run.stderr).toBe("agentloop: budget_exceeded: Cost budget spent: $0.00012 of $0.0000001.\n");
  });
});

describe("prices in agentloop.json", () => {
  it("prices an unlisted model, so a cost budget applies and usage carries the cost", async () => {
    const env = await fake(() => ({
      toolCalls: [{ name: "calculator", arguments: { expression: "1+1" } }],
      usage: { inputTokens: 400, outputTokens: 100 },
    }));
    const dir = folder({ "agentloop.json": { prices: { "local-llama": { input: 1, output: 2 } } } });
    const run = await runCli(["run", "--json", "--model", "local-llama", "--cost-budget", "0.001", "go"], {
      cwd: dir,
      env,
    });
    expect(run.code).toBe(7);
    const last = JSON.parse(run.stdout.trim().split("\n").at(-1) as string);
    // Two calls of 400 × $1 + 100 × $2 per million tokens = $0.0012, over the $0.001 budget.
    expect(last).toMatchObject({ type: "turn_complete", stopReason: "budget_exceeded", iterations: 2 });
    expect(last.usage.costUsd).toBeCloseTo(0.0012, 10);
  });

  it.each([
    [
      { m: { input: -1, output: 1 } },
      "'prices.m.input' in agentloop.json is invalid: Too small: expected number to be >=0.",
    ],
    [
      { m: { input: 1 } },
      "'prices.m.output' in agentloop.json is invalid: expected number, received undefined.",
    ],
    [
      { m: { input: 1, output: 1, extra: 1 } },
      "unknown key 'prices.m.extra' in agentloop.json: remove it (docs/config.md lists every key).",
    ],
  ])(
    "takes { model: { input, output, cachedInput? } }, non-negative, no other keys: %j",
    async (prices, line) => {
      const run = await runCli(["run", "go"], { cwd: folder({ "agentloop.json": { prices } }), env: {} });
      usageError(run, `agentloop: ${line}`);
    },
  );

  it("says how to give a price when a cost budget meets an unpriced model", async () => {
    const run = await runCli(["run", "--model", "local-llama", "--cost-budget", "1", "go"], {
      env: { OPENAI_API_KEY: KEY },
    });
    usageError(
      run,
      `agentloop: A cost budget needs the price of model 'local-llama': add "prices": {"local-llama": {"input": 0.15, "output": 0.6}} (USD per million tokens) to agentloop.json, or drop --cost-budget.`,
    );
  });
});
