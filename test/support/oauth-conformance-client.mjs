// The client under test for the MCP conformance suite (`conformance client --command "node
// <this>"`): the suite appends the scenario's server URL and passes MCP_CONFORMANCE_SCENARIO and
// MCP_CONFORMANCE_CONTEXT. This writes the URL into an agentloop.json and runs the real CLI,
// `agentloop run`, in a pseudo-terminal (a person could sign in), with fake-browser.mjs as
// $BROWSER and a scripted model (a fake OpenAI server) that calls every tool it is offered once.
// Needs `npm run build`.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { startFakeOpenAIServer } from "../../dist/testing/index.js";

const CLI = fileURLToPath(new URL("../../dist/cli/main.js", import.meta.url));
const BROWSER = fileURLToPath(new URL("./fake-browser.mjs", import.meta.url));
/** The suite's client ID metadata document URL: used where the authorization server supports them. */
const CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json";

const url = process.argv.at(-1) ?? "";
const scenario = process.env.MCP_CONFORMANCE_SCENARIO ?? "";
const context = JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT ?? "{}");
const dir = mkdtempSync(join(tmpdir(), "agentloop-conformance-"));

// The user's config: a pre-registered client where the scenario hands one out, else the document URL.
const oauth = context.client_id ? { clientId: context.client_id } : { clientId: CLIENT_METADATA_URL };
if (context.client_secret) oauth.clientSecret = context.client_secret;
if (context.private_key_pem) {
  writeFileSync(join(dir, "client-key.pem"), context.private_key_pem, { mode: 0o600 });
  oauth.privateKeyFile = "client-key.pem";
}
if (scenario.startsWith("auth/client-credentials")) oauth.grant = "client_credentials";
writeFileSync(join(dir, "agentloop.json"), JSON.stringify({ mcpServers: { server: { url, oauth } } }));

/** Arguments that satisfy a tool's required properties. */
function argumentsFor(schema) {
  const sample = { number: 1, integer: 1, boolean: true, string: "x", array: [], object: {} };
  const args = {};
  for (const name of schema?.required ?? []) args[name] = sample[schema.properties?.[name]?.type] ?? "x";
  return args;
}

let called = false;
const model = await startFakeOpenAIServer({
  respond: (request) => {
    const tools = request.body.tools ?? [];
    if (called || tools.length === 0) return { text: "done" };
    called = true;
    return {
      toolCalls: tools.map(({ function: f }) => ({ name: f.name, arguments: argumentsFor(f.parameters) })),
    };
  },
});
const args = ["run", "--no-builtin-tools", "--base-url", model.url, "Use each tool once, then say done."];
const command = [process.execPath, CLI, ...args].map((arg) => JSON.stringify(arg)).join(" ");
const child = spawn("script", ["-qfec", command, "/dev/null"], {
  cwd: dir,
  env: {
    ...process.env,
    BROWSER: `${process.execPath} ${BROWSER}`,
    XDG_CONFIG_HOME: join(dir, "config"),
    OPENAI_API_KEY: "sk-conformance",
    TERM: "dumb",
  },
  stdio: ["pipe", "inherit", "inherit"],
});
child.on("close", async (code) => {
  await model.close();
  rmSync(dir, { recursive: true, force: true });
  process.exit(code ?? 1);
});
