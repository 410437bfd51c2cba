// Per-server options of agentloop.json (tool filters, tool timeout) and the roots agentloop gives
// servers, through the real CLI and real MCP servers.
import { mkdirSync, mkdtempSync, realpathSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { type FakeOpenAIServer, startFakeOpenAIServer } from "../src/testing/fake-openai-server.js";
import { runCli } from "./helpers.js";

const root = (path: string) => fileURLToPath(new URL(`../${path}`, import.meta.url));
const EVERYTHING = root("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
const FILESYSTEM = root("node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
const TEST_SERVER = root("test/support/mcp-test-server.mjs");

let model: FakeOpenAIServer | undefined;
afterEach(async () => {
  await model?.close();
  model = undefined;
});

/** A folder with `agentloop.json` holding `mcpServers`. */
function workspace(mcpServers: object, extra: object = {}): string {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), "agentloop-mcp-options-")));
  writeFileSync(join(dir, "agentloop.json"), JSON.stringify({ mcpServers, ...extra }));
  return dir;
}

/** A model that makes one call, then answers with the result it got. */
async function oneCall(name: string, args: object = {}) {
  model = await startFakeOpenAIServer({
    respond: (request) => {
      const last = request.body.messages.at(-1);
      return last.role === "user"
        ? { toolCalls: [{ name, arguments: args }] }
        : { text: `Result: ${last.content}` };
    },
  });
  return { OPENAI_BASE_URL: model.url, OPENAI_API_KEY: "sk-test" };
}

describe('per-server "tools" filters', () => {
  it("offer only the allowed tools, in the server's order, minus the denied ones (names or globs)", async () => {
    const everything = { command: process.execPath, args: [EVERYTHING, "stdio"] };
    const dir = workspace({
      everything: { ...everything, tools: { allow: ["get-*", "echo"], deny: ["get-env", "get-r??ts-list"] } },
      denied: { ...everything, tools: { deny: ["*"] } },
    });
    const run = await runCli(["tools", "--json", "--no-builtin-tools"], { cwd: dir });
    expect(run.stderr).toBe("");
    const listed = JSON.parse(run.stdout) as { name: string }[];
    expect(listed.map((t) => t.name)).toEqual([
      "echo",
      "get-annotated-message",
      "get-resource-links",
      "get-resource-reference",
      "get-structured-content",
      "get-sum",
      "get-tiny-image",
    ]);
  }, 30_000);

  it("are checked: an unknown key or a wrong type is one line naming it", async () => {
    const server = { command: process.execPath, args: [TEST_SERVER] };
    const cases: [object, string][] = [
      [
        { ...server, tools: { allw: ["x"] } },
        "agentloop: unknown key 'mcpServers.probe.tools.allw' in agentloop.json: remove it (docs/config.md lists every key).\n",
      ],
      [
        { ...server, tools: { deny: "x" } },
        "agentloop: 'mcpServers.probe.tools.deny' in agentloop.json is invalid: expected array, received string.\n",
      ],
      [
        { ...server, toolTimeout: 0 },
        "agentloop: 'mcpServers.probe.toolTimeout' in agentloop.json is invalid: Too small: expected number to be >0.\n",
      ],
    ];
    for (const [entry, line] of cases) {
      const run = await runCli(["tools"], { cwd: workspace({ probe: entry }) });
      expect(run).toMatchObject({ code: 2, stderr: line });
    }
  });
});

describe('per-server "toolTimeout"', () => {
  it("limits each call of the server's tools (seconds), over the default of 60 s", async () => {
    const env = await oneCall("hang");
    const dir = workspace({ probe: { command: process.execPath, args: [TEST_SERVER], toolTimeout: 0.5 } });
    const run = await runCli(["run", "--no-builtin-tools", "Wait for it."], { cwd: dir, env });
    expect(run).toMatchObject({ code: 0, stdout: "Result: Tool 'hang' timed out after 500 ms.\n" });
  });
});

describe("roots", () => {
  /** A workspace with `notes/a.txt` and, beside the folder, `secret.txt`. */
  function notesWorkspace(files: object): string {
    const dir = workspace({ files });
    mkdirSync(join(dir, "notes"));
    writeFileSync(join(dir, "notes", "a.txt"), "a note");
    writeFileSync(join(dir, "secret.txt"), "the secret");
    return dir;
  }

  /** Runs a model that reads `notes/a.txt` and `secret.txt`; the two results. */
  async function readBoth(dir: string): Promise<string[]> {
    const files = ["notes/a.txt", "secret.txt"];
    model = await startFakeOpenAIServer({
      respond: (request) =>
        request.body.messages.at(-1).role === "user"
          ? {
              toolCalls: files.map((file) => ({
                id: file,
                name: "read_text_file",
                arguments: { path: join(dir, file) },
              })),
            }
          : { text: "Read." },
    });
    const env = { OPENAI_BASE_URL: model.url, OPENAI_API_KEY: "sk-test" };
    const run = await runCli(["run", "--json", "--no-builtin-tools", "Read both."], { cwd: dir, env });
    expect(run.code).toBe(0);
    const results = run.stdout
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line))
      .filter((event) => event.type === "tool_result");
    return files.map((file) => results.find((event) => event.id === file)?.content);
  }

  it("are not offered without a roots key: a server limited to notes/ by its arguments stays there", async () => {
    const dir = notesWorkspace({ command: process.execPath, args: [FILESYSTEM, "notes"] });
    const [inside, outside] = await readBoth(dir);
    expect(inside).toBe("a note");
    expect(outside).toMatch(/Access denied/);
  }, 30_000);

  it('are exactly the folders of "roots", relative to the config file\'s folder', async () => {
    const dir = notesWorkspace({ command: process.execPath, args: [FILESYSTEM, "notes"], roots: ["notes"] });
    const [inside, outside] = await readBoth(dir);
    expect(inside).toBe("a note");
    expect(outside).toMatch(/Access denied/);

    const env = await oneCall("roots");
    writeFileSync(
      join(dir, "agentloop.json"),
      JSON.stringify({
        mcpServers: { probe: { command: process.execPath, args: [TEST_SERVER], roots: ["notes"] } },
      }),
    );
    const sub = join(dir, "sub");
    mkdirSync(sub);
    const run = await runCli(["run", "--config", "../agentloop.json", "--no-builtin-tools", "Where?"], {
      cwd: sub,
      env,
    });
    expect(run.code).toBe(0);
    const roots = JSON.parse(run.stdout.replace(/^Result: /, ""));
    expect(roots).toEqual({ roots: [{ uri: pathToFileURL(join(dir, "notes")).href, name: "notes" }] });
  }, 30_000);

  it('are checked: a "roots" entry that is not a folder is one line naming it', async () => {
    const dir = workspace({ probe: { command: process.execPath, args: [TEST_SERVER], roots: ["missing"] } });
    expect(await runCli(["tools"], { cwd: dir })).toMatchObject({
      code: 2,
      stderr: `agentloop: 'mcpServers.probe.roots' in agentloop.json names 'missing', which is not a folder (${join(dir, "missing")}): create it, or fix the path (a relative one starts at the config file's folder).\n`,
    });
  });
});
