// A folder for CLI tests against OAuth-protected MCP servers: its agentloop.json, its own per-user
// config directory (where tokens go), and test/support/fake-browser.mjs as $BROWSER.
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const BROWSER = `${process.execPath} ${fileURLToPath(new URL("./fake-browser.mjs", import.meta.url))}`;

/** A folder with an agentloop.json naming `servers`, its own per-user config dir, and the CLI's env. */
export function oauthWorkspace(servers: Record<string, unknown>) {
  const dir = mkdtempSync(join(tmpdir(), "agentloop-oauth-"));
  writeFileSync(join(dir, "agentloop.json"), JSON.stringify({ mcpServers: servers }));
  const tokens = join(dir, "config", "agentloop", "mcp-oauth");
  const env = { XDG_CONFIG_HOME: join(dir, "config"), BROWSER, FAKE_BROWSER_LOG: join(dir, "browser.log") };
  const files = () => readdirSync(tokens).map((name) => join(tokens, name));
  /** The URLs the browser visited (throws before it was opened). */
  const visited = () => readFileSync(env.FAKE_BROWSER_LOG, "utf8").trim().split("\n");
  return { dir, env, tokens, files, visited };
}
