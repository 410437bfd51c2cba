// MCP elicitation through the CLI: a person in a terminal fills in the form, --yes or config
// "elicitation": "accept-defaults" takes the defaults, otherwise the request is declined with a
// line; `agentloop serve` declines unless configured otherwise.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { type FakeOpenAIServer, startFakeOpenAIServer } from "../src/testing/fake-openai-server.js";
import { runCli } from "./helpers.js";
import { startServe } from "./support/serve-process.js";
import { terminal } from "./support/terminal.js";

const TEST_SERVER = fileURLToPath(new URL("./support/mcp-test-server.mjs", import.meta.url));

let model: FakeOpenAIServer | undefined;
afterEach(async () => {
  await model?.close();
  model = undefined;
});

const FORM = {
  type: "object",
  properties: {
    name: { type: "string", title: "Name", description: "Your name" },
    age: { type: "integer", minimum: 0, maximum: 150, default: 30 },
    color: { type: "string", enum: ["red", "green"], default: "green" },
  },
  required: ["name"],
};
const DEFAULTS_ONLY = {
  type: "object",
  properties: { size: { type: "string", enum: ["S", "M", "L"], default: "M" }, gift: { type: "boolean" } },
};

/** A workspace whose model calls the test server's `ask` tool with `form`, then answers with the tool's result. */
async function workspace(form: object, config: object = {}) {
  const dir = mkdtempSync(join(tmpdir(), "agentloop-elicit-"));
  const mcpServers = { probe: { command: process.execPath, args: [TEST_SERVER] } };
  writeFileSync(join(dir, "agentloop.json"), JSON.stringify({ mcpServers, ...config }));
  model = await startFakeOpenAIServer({
    respond: (request) => {
      const last = request.body.messages.at(-1);
      if (last.role === "user")
        return { toolCalls: [{ name: "ask", arguments: { message: "Who are you?", form } }] };
      return { text: `Got ${last.content}` };
    },
  });
  const env = { OPENAI_BASE_URL: model.url, OPENAI_API_KEY: "sk-test" };
  return { cwd: dir, env };
}

describe("agentloop run, asked for input by an MCP server", () => {
  it("asks in a terminal for each field, with its type and default, until the values fit", async () => {
    const { cwd, env } = await workspace(FORM);
    const run = terminal(["run", "--no-builtin-tools", "Introduce yourself."], { cwd, env });
    await run.waitFor("Answer? [y]es, [n]o: ");
    expect(run.output).toMatch(/MCP server 'probe' asks:\S* Who are you\?/);
    run.type("y\r");
    await run.waitFor("Name – Your name (string, required): ");
    run.type("\r");
    await run.waitFor("Name is required.");
    await run.waitFor("Name – Your name (string, required): ");
    run.type("Ada Lovelace\r");
    await run.waitFor("age (integer, default 30): ");
    run.type("old\r");
    await run.waitFor("age must be a number.");
    run.type("200\r");
    await run.waitFor("age must be at most 150.");
    run.type("\r");
    await run.waitFor("color (one of red, green, default green): ");
    run.type("RED\r");
    expect(await run.exited).toBe(0);
    expect(run.output).toContain(
      'Got {"action":"accept","content":{"name":"Ada Lovelace","age":30,"color":"red"}}',
    );
  });

  it("declines when the person says no", async () => {
    const { cwd, env } = await workspace(FORM);
    const run = terminal(["run", "--no-builtin-tools", "Introduce yourself."], { cwd, env });
    await run.waitFor("Answer? [y]es, [n]o: ");
    run.type("n\r");
    expect(await run.exited).toBe(0);
    expect(run.output).toContain('Got {"action":"decline"}');
  });

  it("without a terminal declines with one line saying how to answer", async () => {
    const { cwd, env } = await workspace(FORM);
    const run = await runCli(["run", "--no-builtin-tools", "Introduce yourself."], { cwd, env });
    expect(run).toMatchObject({
      code: 0,
      stdout: 'Got {"action":"decline"}\n',
      stderr:
        "agentloop: MCP server 'probe' asked for input (\"Who are you?\"): declined: nobody can answer it here (run in a terminal to be asked, or pass --yes to accept a form whose required fields have defaults).\n",
    });
  });

  it("with --yes accepts a form whose required fields have defaults, and declines one whose do not", async () => {
    const defaults = await workspace(DEFAULTS_ONLY);
    const accepted = await runCli(["run", "--yes", "--no-builtin-tools", "Pick."], defaults);
    expect(accepted).toMatchObject({ code: 0, stdout: 'Got {"action":"accept","content":{"size":"M"}}\n' });
    await model?.close();

    const required = await workspace(FORM);
    const declined = await runCli(["run", "--yes", "--no-builtin-tools", "Pick."], required);
    expect(declined).toMatchObject({
      code: 0,
      stdout: 'Got {"action":"decline"}\n',
      stderr:
        "agentloop: MCP server 'probe' asked for input (\"Who are you?\"): declined: --yes accepts only a form whose required fields have defaults, and 'name' has none.\n",
    });
  });

  it("with --yes names a default of the server's that is not one of its field's choices", async () => {
    const form = {
      type: "object",
      properties: { size: { type: "string", enum: ["S", "M"], default: "XL" } },
    };
    const run = await runCli(["run", "--yes", "--no-builtin-tools", "Pick."], await workspace(form));
    expect(run).toMatchObject({
      code: 0,
      stdout: 'Got {"action":"decline"}\n',
      stderr: `agentloop: warning: MCP server 'probe' (agentloop.json) asked for input with a form whose own default does not fit ('size' defaults to "XL", which must be one of S, M): declined.\n`,
    });
  });

  it('follows config "elicitation": "accept-defaults" without --yes, and "decline" even in a terminal', async () => {
    const defaults = await workspace(DEFAULTS_ONLY, { elicitation: "accept-defaults" });
    const accepted = await runCli(["run", "--no-builtin-tools", "Pick."], defaults);
    expect(accepted).toMatchObject({ code: 0, stdout: 'Got {"action":"accept","content":{"size":"M"}}\n' });
    await model?.close();

    const never = await workspace(FORM, { elicitation: "decline" });
    const run = terminal(["run", "--no-builtin-tools", "Pick."], never);
    expect(await run.exited).toBe(0);
    expect(run.output).not.toContain("Answer?");
    expect(run.output).toContain('config "elicitation" is "decline".');
    expect(run.output).toContain('Got {"action":"decline"}');
  });

  it("names a wrong config value in one line", async () => {
    const { cwd, env } = await workspace(FORM, { elicitation: "yes" });
    const run = await runCli(["run", "hi"], { cwd, env });
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/^agentloop: 'elicitation' in agentloop\.json is invalid: .*"ask".*\n$/);
  });
});

describe("agentloop serve, asked for input by an MCP server", () => {
  const chat = async (url: string) => {
    const response = await fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ messages: [{ role: "user", content: "Pick." }] }),
    });
    return ((await response.json()) as { choices: { message: { content: string } }[] }).choices[0]?.message
      .content;
  };

  it("declines unless the config accepts defaults", async () => {
    const { cwd, env } = await workspace(DEFAULTS_ONLY);
    const serve = startServe(env, ["--no-builtin-tools"], cwd);
    expect(await chat(await serve.url())).toBe('Got {"action":"decline"}');
    expect(serve.stderr()).toContain(
      'agentloop: MCP server \'probe\' asked for input ("Who are you?"): declined: the server cannot ask anyone (set "elicitation": "accept-defaults" in agentloop.json to accept forms whose required fields have defaults).\n',
    );
    serve.child.kill("SIGTERM");
    await serve.exited;
    await model?.close();

    const configured = await workspace(DEFAULTS_ONLY, { elicitation: "accept-defaults" });
    const accepting = startServe(configured.env, ["--no-builtin-tools"], configured.cwd);
    expect(await chat(await accepting.url())).toBe('Got {"action":"accept","content":{"size":"M"}}');
  });
});
