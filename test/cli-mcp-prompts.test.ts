// MCP prompts (server-everything's) through the library, `agentloop tools`, `agentloop mcp prompts` and `/name` in
// `agentloop chat`; and a server's request for input answered in the chat.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { connectMcpServers } from "../src/mcp/index.js";
import { type FakeOpenAIServer, startFakeOpenAIServer } from "../src/testing/fake-openai-server.js";
import { runCli } from "./helpers.js";
import { terminal } from "./support/terminal.js";

const root = (path: string) => fileURLToPath(new URL(`../${path}`, import.meta.url));
const EVERYTHING = root("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
const TEST_SERVER = root("test/support/mcp-test-server.mjs");
const everything = { command: process.execPath, args: [EVERYTHING, "stdio"] };

let model: FakeOpenAIServer | undefined;
afterEach(async () => {
  await model?.close();
  model = undefined;
});

/** A folder whose agentloop.json has server-everything, and a model that echoes the user's last message. */
async function workspace(mcpServers: object = { everything }) {
  const cwd = mkdtempSync(join(tmpdir(), "agentloop-prompts-"));
  writeFileSync(join(cwd, "agentloop.json"), JSON.stringify({ mcpServers }));
  model = await startFakeOpenAIServer({
    respond: (request) => ({ text: `You said: ${request.body.messages.at(-1).content}` }),
  });
  return { cwd, env: { OPENAI_BASE_URL: model.url, OPENAI_API_KEY: "sk-test" } };
}

describe("MCP prompts", () => {
  it("are listed and rendered by the library", async () => {
    const toolset = await connectMcpServers({ everything });
    try {
      expect(toolset.prompts().map((p) => p.name)).toEqual([
        "simple-prompt",
        "args-prompt",
        "completable-prompt",
        "resource-prompt",
      ]);
      expect(toolset.prompts()[1]).toEqual({
        name: "args-prompt",
        server: "everything",
        originalName: "args-prompt",
        title: "Arguments Prompt",
        description: "A prompt with two arguments, one required and one optional",
        arguments: [
          { name: "city", description: "Name of the city", required: true },
          { name: "state", required: false },
        ],
      });
      const rendered = await toolset.getPrompt("args-prompt", { city: "Paris" });
      expect(rendered.messages).toEqual([
        { role: "user", content: { type: "text", text: "What's weather in Paris?" } },
      ]);
      await expect(toolset.getPrompt("args-prompt", {})).rejects.toThrow(
        "Prompt 'args-prompt' needs city: give city=….",
      );
      await expect(toolset.getPrompt("nope")).rejects.toThrow("No MCP prompt is named 'nope'.");
    } finally {
      await toolset.close();
    }
  }, 30_000);

  it("are listed by agentloop tools after the tools, and by agentloop mcp prompts; tools --json keeps only tools", async () => {
    const { cwd } = await workspace();
    const listing =
      "/simple-prompt (mcp:everything)\n  A prompt with no arguments\n/args-prompt city state? (mcp:everything)\n";
    const text = await runCli(["tools"], { cwd });
    expect(text.stdout).toContain(`\nPrompts (/name in agentloop chat):\n${listing}`);
    // Scripts read every entry of `tools --json` as a tool: name, source, description, parameters.
    const tools = JSON.parse((await runCli(["tools", "--json"], { cwd })).stdout) as object[];
    expect(tools.length).toBeGreaterThan(5);
    for (const tool of tools) {
      expect(Object.keys(tool)).toEqual(["name", "source", "description", "parameters"]);
    }
    const plain = await runCli(["mcp", "prompts"], { cwd });
    expect(plain.stdout.slice(0, listing.length)).toBe(listing);
    const json = await runCli(["mcp", "prompts", "--json"], { cwd });
    const prompts = JSON.parse(json.stdout) as { name: string }[];
    expect(prompts[1]).toEqual({
      name: "args-prompt",
      source: "mcp:everything",
      description: "A prompt with two arguments, one required and one optional",
      arguments: [
        { name: "city", description: "Name of the city", required: true },
        { name: "state", required: false },
      ],
    });
  }, 30_000);

  it("run as /name key=value in agentloop chat; a missing required argument or an unknown one is one line", async () => {
    const { cwd, env } = await workspace();
    const input = [
      '/args-prompt city=Paris state="Ile de France"',
      "/args-prompt",
      "/args-prompt town=Paris",
      "/simple-prompt",
    ].join("\n");
    const run = await runCli(["chat"], { cwd, env, input });
    expect(run.code).toBe(0);
    expect(run.stdout).toContain("You said: What's weather in Paris, Ile de France?");
    expect(run.stdout).toContain("(/args-prompt needs city: /args-prompt city=… [state=…])");
    expect(run.stdout).toContain("(/args-prompt has no argument 'town' (its arguments: city, state))");
    expect(run.stdout).toContain("You said: This is a simple prompt without arguments.");
    expect(model?.requests).toHaveLength(2);
  }, 30_000);

  it("ask for their arguments in a terminal when none are given", async () => {
    const { cwd, env } = await workspace();
    const chat = terminal(["chat"], { cwd, env });
    await chat.waitFor("› ");
    chat.type("/args-prompt\r");
    await chat.waitFor("city – Name of the city (required): ");
    chat.type("Lyon\r");
    await chat.waitFor("state (optional): ");
    chat.type("\r");
    await chat.waitFor("You said: What's weather in Lyon?");
    chat.type("/exit\r");
    expect(await chat.exited).toBe(0);
  }, 30_000);
});

describe("agentloop chat, asked for input by an MCP server", () => {
  it("asks for the form's fields inline", async () => {
    const cwd = mkdtempSync(join(tmpdir(), "agentloop-chat-elicit-"));
    const probe = { command: process.execPath, args: [TEST_SERVER] };
    writeFileSync(join(cwd, "agentloop.json"), JSON.stringify({ mcpServers: { probe } }));
    const form = { type: "object", properties: { city: { type: "string" } }, required: ["city"] };
    model = await startFakeOpenAIServer({
      respond: (request) => {
        const last = request.body.messages.at(-1);
        return last.role === "user"
          ? { toolCalls: [{ name: "ask", arguments: { message: "Which city?", form } }] }
          : { text: `Got ${last.content}` };
      },
    });
    const chat = terminal(["chat", "--no-builtin-tools"], {
      cwd,
      env: { OPENAI_BASE_URL: model.url, OPENAI_API_KEY: "sk-test" },
    });
    await chat.waitFor("› ");
    chat.type("Where to?\r");
    await chat.waitFor("Answer? [y]es, [n]o: ");
    chat.type("y\r");
    await chat.waitFor("city (string, required): ");
    chat.type("Oslo\r");
    await chat.waitFor('Got {"action":"accept","content":{"city":"Oslo"}}');
    chat.type("/exit\r");
    expect(await chat.exited).toBe(0);
  }, 30_000);
});
