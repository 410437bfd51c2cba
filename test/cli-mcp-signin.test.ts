// The sign-in in the browser as a person meets it through the CLI: Ctrl+C while agentloop waits
// for the browser, and a sign-in that expired (the refresh token refused) in an earlier run.
import { existsSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { afterEach, describe, expect, it } from "vitest";
import { type FakeOpenAIServer, startFakeOpenAIServer } from "../src/testing/fake-openai-server.js";
import { runCli } from "./helpers.js";
import { startOAuthServer } from "./support/oauth-server.js";
import { oauthWorkspace } from "./support/oauth-workspace.js";
import { terminal } from "./support/terminal.js";

let model: FakeOpenAIServer | undefined;
afterEach(async () => {
  await model?.close();
  model = undefined;
});

async function whoamiModel() {
  model = await startFakeOpenAIServer({
    respond: [{ toolCalls: [{ name: "whoami", arguments: {} }] }, { text: "ada is signed in" }],
  });
  return { OPENAI_BASE_URL: model.url, OPENAI_API_KEY: "sk-test" };
}

/** Whether something listens at `url` (the loopback callback). */
async function listening(url: string): Promise<boolean> {
  try {
    await (await fetch(url)).text();
    return true;
  } catch {
    return false;
  }
}

describe("Ctrl+C while agentloop waits for the sign-in in the browser", { timeout: 60_000 }, () => {
  it("ends a run in a terminal at once: exit 130 and one line", async () => {
    const as = await startOAuthServer();
    const w = oauthWorkspace({ secure: { url: as.url } });
    // The browser opens, and the person does not sign in.
    const env = { ...w.env, FAKE_BROWSER_AWAY: "1", ...(await whoamiModel()) };
    const session = terminal(["run", "--no-builtin-tools", "Who is signed in?"], { cwd: w.dir, env });
    await session.waitFor("sign in to MCP server 'secure' in your browser:");
    session.type("\x03");
    expect(await session.exited).toBe(130);
    const lines = session.output.replace("^C", "").trim().split(/\r?\n/); // the terminal echoes ^C
    expect(lines.at(-1)).toBe("agentloop: sign-in to MCP server 'secure' cancelled.");
    expect(lines.filter((line) => line.startsWith("agentloop:"))).toHaveLength(2); // the sign-in's and this
    expect(model?.requests).toHaveLength(0);
  });

  it("ends agentloop mcp login at once on SIGINT: exit 130, one line, nothing listening", async () => {
    const as = await startOAuthServer();
    const w = oauthWorkspace({ secure: { url: as.url } });
    const env = { ...w.env, FAKE_BROWSER_AWAY: "1" };
    const login = await runCli(["mcp", "login", "secure"], {
      cwd: w.dir,
      env,
      onSpawn: async (kill) => {
        while (!existsSync(env.FAKE_BROWSER_LOG)) await sleep(20);
        kill("SIGINT");
      },
    });
    expect(login.code).toBe(130);
    expect(login.stderr.trim().split("\n").slice(2)).toEqual([
      "agentloop: sign-in to MCP server 'secure' cancelled.",
    ]);
    const callback = new URL(w.visited()[0] ?? "").searchParams.get("redirect_uri") ?? "";
    expect(callback).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/callback$/);
    expect(await listening(callback)).toBe(false);
    expect(as.log.map((entry) => entry.path)).not.toContain("/token");
  });
});

describe("a sign-in that expired in an earlier run", { timeout: 60_000 }, () => {
  it("is named as expired, not as a first sign-in, when a run in a terminal signs in again", async () => {
    const as = await startOAuthServer();
    const w = oauthWorkspace({ secure: { url: as.url } });
    expect((await runCli(["mcp", "login", "secure"], { cwd: w.dir, env: w.env })).code).toBe(0);
    as.expireAccessTokens();
    as.knobs.refuseRefresh = true;
    // Without a terminal: the refresh token is refused, and nobody can sign in.
    const piped = await runCli(["run", "--no-builtin-tools", "Who?"], {
      cwd: w.dir,
      env: { ...w.env, ...(await whoamiModel()) },
    });
    expect(piped.stderr).toContain("has expired (the authorization server refused the refresh token)");
    await model?.close();
    // Again without a terminal, and then in one: still expired, though no token is left.
    const again = await runCli(["run", "--no-builtin-tools", "Who?"], {
      cwd: w.dir,
      env: { ...w.env, ...(await whoamiModel()) },
    });
    expect(again.stderr).toContain(`the sign-in to ${as.url} has expired`);
    await model?.close();
    const env = { ...w.env, ...(await whoamiModel()) };
    const session = terminal(["run", "--no-builtin-tools", "Who is signed in?"], { cwd: w.dir, env });
    expect(await session.exited).toBe(0);
    expect(session.output).toContain(
      "agentloop: the sign-in to MCP server 'secure' has expired; signing in again in your browser:",
    );
    expect(session.output).toContain("ada is signed in");
  });
});
