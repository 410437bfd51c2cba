import { execFileSync } from "node:child_process";
import { copyFileSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { type FakeOpenAIServer, startFakeOpenAIServer } from "../src/testing/fake-openai-server.js";
import { interruptOnFirstRequest, runCli } from "./helpers.js";

const USERS_SERVER = fileURLToPath(new URL("../examples/users-server/server.mjs", import.meta.url));
const USERS_JSON = fileURLToPath(new URL("../examples/users-server/users.json", import.meta.url));

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
    expect(failed.stderr).toMatch(/^agentloop: MCP server 'broken' failed to start: .+"optional": true\.\n$/);
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
});
