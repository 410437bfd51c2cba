import { execFileSync } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { rootCertificates } from "node:tls";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { type FakeOpenAIServer, startFakeOpenAIServer } from "../src/testing/fake-openai-server.js";
import { interruptOnFirstRequest, runCli } from "./helpers.js";

const USERS_SERVER = fileURLToPath(new URL("../examples/users-server/server.mjs", import.meta.url));
const USERS_JSON = fileURLToPath(new URL("../examples/users-server/users.json", import.meta.url));
const TEST_SERVER = fileURLToPath(new URL("./support/mcp-test-server.mjs", import.meta.url));

let server: FakeOpenAIServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

/** A temp folder with its own copy of the users file and an agentloop.json using the users server. */
function workspace(extraServers: Record<string, unknown> = {}) {
  const dir = mkdtempSync(join(tmpdir(), "agentloop-mcp-"));
  const users = join(dir, "users.json");
  copyFileSync(USERS_JSON, users);
  const mcpServers = { users: { command: process.execPath, args: [USERS_SERVER, users] }, ...extraServers };
  writeFileSync(join(dir, "agentloop.json"), JSON.stringify({ mcpServers }));
  return { dir, users };
}

/** Processes still running whose command line mentions `marker`. */
function survivors(marker: string): string[] {
  try {
    return execFileSync("pgrep", ["-af", marker], { encoding: "utf8" }).trim().split("\n").filter(Boolean);
  } catch {
    return []; // pgrep exits 1 when nothing matches
  }
}

describe("agentloop with MCP servers from agentloop.json", () => {
  it("lists MCP tools with their source", async () => {
    const { dir } = workspace();
    const run = await runCli(["tools", "--json"], { cwd: dir });
    expect(run.code).toBe(0);
    const tools = JSON.parse(run.stdout) as { name: string; source: string }[];
    expect(tools.map((t) => `${t.name}:${t.source}`)).toEqual([
      "calculator:local",
      "get_current_time:local",
      "convert_temperature:local",
      "search_users:mcp:users",
      "get_user_by_id:mcp:users",
      "update_user:mcp:users",
    ]);
  });

  it("finds Bob, reads his record and updates his company, leaving no server process behind", async () => {
    const { dir, users } = workspace();
    server = await startFakeOpenAIServer({
      respond: [
        { toolCalls: [{ name: "search_users", arguments: { query: "bob" } }] },
        { toolCalls: [{ name: "get_user_by_id", arguments: { id: "u2" } }] },
        { toolCalls: [{ name: "update_user", arguments: { id: "u2", company: "Initrode" } }] },
        { text: "Bob now works at Initrode." },
      ],
    });
    const env = { OPENAI_BASE_URL: server.url, OPENAI_API_KEY: "sk-test" };
    const run = await runCli(["run", "Move Bob to Initrode."], { cwd: dir, env });
    expect(run.code).toBe(0);
    expect(run.stdout).toBe("Bob now works at Initrode.\n");
    const results = server.requests.map((r) => r.body.messages.at(-1));
    expect(results[1].content).toContain("Bob Stone");
    expect(results[2].content).toContain("Globex");
    const saved = JSON.parse(readFileSync(users, "utf8")) as { id: string; company: string }[];
    expect(saved.find((u) => u.id === "u2")?.company).toBe("Initrode");
    expect(survivors(users)).toEqual([]);
  });

  it("exits 2 naming a server that fails to start, and warns for an optional one", async () => {
    server = await startFakeOpenAIServer({ respond: () => ({ text: "fine" }) });
    const env = { OPENAI_BASE_URL: server.url, OPENAI_API_KEY: "sk-test" };
    const broken = workspace({ broken: { command: "definitely-not-a-command-xyz" } });
    const failed = await runCli(["run", "hi"], { cwd: broken.dir, env });
    expect(failed.code).toBe(2);
    expect(failed.stderr).toBe(
      `agentloop: MCP server 'broken' (agentloop.json) failed to start: command 'definitely-not-a-command-xyz' not found. Install it, or fix its "command" (a program on PATH or a full path), or mark it "optional": true.\n`,
    );
    expect(survivors(broken.users)).toEqual([]);

    const optional = workspace({ broken: { command: "definitely-not-a-command-xyz", optional: true } });
    const ok = await runCli(["run", "hi"], { cwd: optional.dir, env });
    expect(ok.code).toBe(0);
    expect(ok.stdout).toBe("fine\n");
    expect(ok.stderr).toMatch(/warning: .*broken/);
  });

  it("closes the MCP servers when interrupted with Ctrl+C", async () => {
    const { dir, users } = workspace();
    server = await startFakeOpenAIServer({ respond: () => ({ stall: true }) });
    const env = { OPENAI_BASE_URL: server.url, OPENAI_API_KEY: "sk-test" };
    const run = await runCli(["run", "hi"], {
      cwd: dir,
      env,
      onSpawn: interruptOnFirstRequest(server as FakeOpenAIServer),
    });
    expect(run.code).toBe(130);
    expect(survivors(users)).toEqual([]);
  });

  it("passes proxy and CA variables to a stdio server, and no API key the entry does not name", async () => {
    const dir = mkdtempSync(join(tmpdir(), "agentloop-mcp-env-"));
    const ca = join(dir, "corp-ca.pem");
    writeFileSync(ca, rootCertificates[0] ?? "");
    const probe = { command: process.execPath, args: [TEST_SERVER], env: { NAMED_API_KEY: "named-in-env" } };
    writeFileSync(join(dir, "agentloop.json"), JSON.stringify({ mcpServers: { probe } }));
    server = await startFakeOpenAIServer({
      respond: [{ toolCalls: [{ name: "env", arguments: {} }] }, { text: "seen" }],
    });
    const env = {
      OPENAI_BASE_URL: server.url,
      OPENAI_API_KEY: "sk-test-parent-key",
      ANTHROPIC_API_KEY: "anthropic-parent-key",
      AGENTLOOP_API_KEY: "server-key",
      GITHUB_TOKEN: "ghp-parent-token",
      HTTPS_PROXY: "http://proxy.invalid:3128",
      https_proxy: "http://proxy.invalid:3128",
      NO_PROXY: "127.0.0.1,localhost",
      NODE_EXTRA_CA_CERTS: ca,
      SSL_CERT_FILE: ca,
      npm_config_registry: "https://registry.invalid/",
      "npm_config_//registry.invalid/:_authToken": "npm-parent-token",
      LANG: "C.UTF-8",
    };
    const run = await runCli(["run", "What is your environment?"], { cwd: dir, env });
    expect(run.stderr).toBe("");
    expect(run.stdout).toBe("seen\n");
    const seen = JSON.parse(server.requests[1]?.body.messages.at(-1).content) as Record<string, string>;
    expect(seen).toMatchObject({
      HTTPS_PROXY: "http://proxy.invalid:3128",
      https_proxy: "http://proxy.invalid:3128",
      NO_PROXY: "127.0.0.1,localhost",
      NODE_EXTRA_CA_CERTS: ca,
      SSL_CERT_FILE: ca,
      npm_config_registry: "https://registry.invalid/",
      LANG: "C.UTF-8",
      // Passed, and a configured secret: what the model reads has it redacted.
      NAMED_API_KEY: "[REDACTED]",
    });
    expect(Object.keys(seen).filter((name) => /KEY|TOKEN|_auth/i.test(name))).toEqual(["NAMED_API_KEY"]);
    expect(JSON.stringify(seen)).not.toMatch(/parent-key|parent-token|server-key/);
  });

  it("names the --config file and the true cause of a server that cannot start", async () => {
    const unauthorized = createServer((_req, res) => {
      res.writeHead(401, { "content-type": "text/plain" }).end("Unauthorized");
    });
    await new Promise<void>((resolve) => unauthorized.listen(0, "127.0.0.1", resolve));
    const address = unauthorized.address();
    const url = `http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}/mcp`;
    const causes: [unknown, string][] = [
      [
        { command: "definitely-not-a-command-xyz" },
        `command 'definitely-not-a-command-xyz' not found. Install it, or fix its "command" (a program on PATH or a full path)`,
      ],
      [
        { command: process.execPath, args: ["-e", "console.error('FOO_HOME is not set'); process.exit(78)"] },
        `the server exited with code 78 (stderr: FOO_HOME is not set). Check its "command", "args" and "env"`,
      ],
      [
        { url, headers: { Authorization: "Bearer expired-token" } },
        `${url} answered 401 Unauthorized. Check its "headers" (e.g. "Authorization")`,
      ],
    ];
    try {
      const dir = mkdtempSync(join(tmpdir(), "agentloop-mcp-causes-"));
      mkdirSync(join(dir, "conf"));
      for (const [entry, cause] of causes) {
        writeFileSync(join(dir, "conf", "servers.json"), JSON.stringify({ mcpServers: { broken: entry } }));
        const run = await runCli(["tools", "--config", "conf/servers.json"], { cwd: dir });
        expect(run.code).toBe(2);
        expect(run.stderr).toBe(
          `agentloop: MCP server 'broken' (conf/servers.json) failed to start: ${cause}, or mark it "optional": true.\n`,
        );
        expect(run.stderr).not.toContain("expired-token");
      }
    } finally {
      unauthorized.close();
    }
    // Nothing listens there any more.
    const dir = mkdtempSync(join(tmpdir(), "agentloop-mcp-refused-"));
    writeFileSync(join(dir, "agentloop.json"), JSON.stringify({ mcpServers: { remote: { url } } }));
    const refused = await runCli(["tools"], { cwd: dir });
    expect(refused.code).toBe(2);
    expect(refused.stderr).toBe(
      `agentloop: MCP server 'remote' (agentloop.json) failed to start: nothing is listening at ${url}. Start the server, or fix its "url", or mark it "optional": true.\n`,
    );
  });

  it("turns a tool result over the stdio message limit into an error the model reads, then recovers", async () => {
    const dir = mkdtempSync(join(tmpdir(), "agentloop-mcp-big-"));
    const probe = { command: process.execPath, args: [TEST_SERVER] };
    writeFileSync(join(dir, "agentloop.json"), JSON.stringify({ mcpServers: { probe } }));
    server = await startFakeOpenAIServer({
      respond: [
        { toolCalls: [{ name: "big", arguments: { bytes: 11 * 1024 * 1024 } }] },
        { toolCalls: [{ name: "big", arguments: { bytes: 3 } }] },
        { text: "done" },
      ],
    });
    const env = { OPENAI_BASE_URL: server.url, OPENAI_API_KEY: "sk-test" };
    const run = await runCli(["run", "Fetch it."], { cwd: dir, env });
    expect(run.code).toBe(0);
    const results = server.requests.slice(1).map((r) => r.body.messages.at(-1).content);
    expect(results).toEqual([
      "MCP server 'probe' (agentloop.json) could not run 'big': it sent a message over the 10.0 MB limit of MCP stdio messages. Ask the tool for less (a filter, a range, a page). It will be restarted on the next call.",
      "xxx",
    ]);
  });
});
