import { AgentloopError } from "../core/errors.js";
import { isHttpConfig } from "../mcp/config.js";
import { openInBrowser } from "../mcp/oauth-browser.js";
import { signInKey } from "../mcp/oauth-provider.js";
import { fileTokenStore, TokenStoreError } from "../mcp/oauth-store.js";
import { loadConfigFile } from "./config.js";
import { interruptible } from "./interrupt.js";

/**
 * How the CLI lets a person sign in: the line and the URL on stderr, the URL opened with
 * `$BROWSER` or the platform's opener.
 */
export function browserSignIn(url: string, message: string): void {
  process.stderr.write(`agentloop: ${message}:\n  ${url}\n`);
  openInBrowser(url, process.env, (problem) =>
    process.stderr.write(`agentloop: ${problem}: open the URL above yourself.\n`),
  );
}

/**
 * `agentloop mcp login <server>`: signs in to a configured remote server ahead of time (a new
 * sign-in, forgetting the stored tokens), so later runs, even without a terminal, have a token.
 */
export async function mcpLogin(server: string, flags: { config?: string }): Promise<number> {
  const { config, name, notes, path } = await loadConfigFile(flags.config);
  if (path === undefined) {
    throw new AgentloopError(
      "usage",
      `no config file found (agentloop.json in the working directory), so no MCP server '${server}': create one with {"mcpServers": {"${server}": {"url": "https://…"}}}, or pass --config <file>.`,
    );
  }
  for (const note of notes) process.stderr.write(`agentloop: note: ${note}\n`);
  const servers = config.mcpServers ?? {};
  const entry = servers[server];
  if (entry === undefined) {
    const known = Object.keys(servers);
    throw new AgentloopError(
      "usage",
      `no MCP server '${server}' in ${name}${known.length > 0 ? ` (it has ${known.map((s) => `'${s}'`).join(", ")})` : ""}: check the name, or pass --config.`,
    );
  }
  if (!isHttpConfig(entry)) {
    throw new AgentloopError(
      "usage",
      `MCP server '${server}' in ${name} is a local (stdio) server: only remote ("url") servers sign in.`,
    );
  }
  if (Object.keys(entry.headers ?? {}).some((key) => key.toLowerCase() === "authorization")) {
    throw new AgentloopError(
      "usage",
      `MCP server '${server}' in ${name} sends its own "Authorization" header: remove it to sign in with OAuth.`,
    );
  }
  const warn = (message: string) => process.stderr.write(`agentloop: warning: ${message}\n`);
  const store = fileTokenStore({ onWarning: warn });
  const key = signInKey(entry.url, entry.oauth ?? {});
  const stored = await store.load(key).catch(() => undefined);
  // A new sign-in: the tokens go, and so does the trust in a configured client's authorization server.
  const keep = stored?.client && stored.client.client_id !== entry.oauth?.clientId;
  try {
    await store.save(key, { url: entry.url, ...(keep && { client: stored.client }) });
  } catch (error) {
    if (!(error instanceof TokenStoreError)) throw error;
    throw new AgentloopError("config", `${error.reason}: ${lowerFirst(error.fix)}.`);
  }
  const { connectMcpServers } = await import("../mcp/index.js");
  // Ctrl+C while the browser is open ends the sign-in at once (exit 130, one line).
  const toolset = await interruptible(
    (signal) =>
      connectMcpServers(
        { [server]: entry },
        { configFile: name, onWarning: warn, oauth: { store, openUrl: browserSignIn }, signal },
      ),
    (made) => made.close(),
  );
  const tools = toolset.tools().length;
  await toolset.close();
  const signedIn = (await store.load(key))?.tokens !== undefined;
  process.stderr.write(
    signedIn
      ? `agentloop: signed in to MCP server '${server}' (${tools} tool${tools === 1 ? "" : "s"}).\n`
      : `agentloop: MCP server '${server}' did not ask for a sign-in: it works without one.\n`,
  );
  return 0;
}

const lowerFirst = (text: string) => text.charAt(0).toLowerCase() + text.slice(1);
