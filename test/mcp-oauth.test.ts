// OAuth sign-in through the library: connectMcpServers with a token store and a way to open URLs.
import { describe, expect, it } from "vitest";
import { connectMcpServers, memoryTokenStore } from "../src/mcp/index.js";
import { call } from "./support/mcp-helpers.js";
import { startOAuthServer } from "./support/oauth-server.js";

describe("connectMcpServers with oauth", () => {
  it("signs in through openUrl, keeps the tokens in its store, and refreshes them during a call", async () => {
    const as = await startOAuthServer();
    const store = memoryTokenStore();
    const shown: string[] = [];
    // The browser: follows the authorization server's redirect back to the loopback callback.
    const openUrl = async (url: string, message: string) => {
      shown.push(message);
      await (await fetch(url)).text();
    };
    const first = await connectMcpServers({ secure: { url: as.url } }, { oauth: { store, openUrl } });
    try {
      expect(await call(first, "whoami", {})).toEqual({ content: "signed in as ada", isError: false });
    } finally {
      await first.close();
    }
    expect(shown).toEqual(["sign in to MCP server 'secure' in your browser"]);

    // Nobody to sign in now: the stored token serves, and is refreshed when it expires mid-run.
    const second = await connectMcpServers({ secure: { url: as.url } }, { oauth: { store } });
    try {
      as.expireAccessTokens();
      expect(await call(second, "whoami", {})).toEqual({ content: "signed in as ada", isError: false });
      expect(as.log.at(-1)?.params.grant_type).toBe("refresh_token");
    } finally {
      await second.close();
    }
    expect(shown).toHaveLength(1);
  });

  it("gives up a sign-in waiting for the browser once its signal aborts, closing the callback", async () => {
    const as = await startOAuthServer();
    const controller = new AbortController();
    let callback = "";
    // The browser opens, and the person walks away: Ctrl+C.
    const openUrl = (url: string) => {
      callback = new URL(url).searchParams.get("redirect_uri") ?? "";
      setImmediate(() => controller.abort());
    };
    const connecting = connectMcpServers(
      { secure: { url: as.url } },
      { oauth: { store: memoryTokenStore(), openUrl }, signal: controller.signal },
    );
    await expect(connecting).rejects.toMatchObject({
      code: "aborted",
      message: "sign-in to MCP server 'secure' cancelled.",
    });
    expect(callback).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/callback$/);
    await expect(fetch(callback)).rejects.toThrow(); // nothing listens there any more
  });

  it("a call that finds the sign-in gone, with nobody to sign in, is an error result naming mcp login", async () => {
    const as = await startOAuthServer();
    const store = memoryTokenStore();
    const openUrl = async (url: string) => void (await (await fetch(url)).text());
    await (await connectMcpServers({ secure: { url: as.url } }, { oauth: { store, openUrl } })).close();
    const toolset = await connectMcpServers({ secure: { url: as.url } }, { oauth: { store } });
    try {
      as.expireAccessTokens();
      as.knobs.refuseRefresh = true;
      expect(await call(toolset, "whoami", {})).toEqual({
        content: `MCP server 'secure' could not run 'whoami': the sign-in to ${as.url} has expired (the authorization server refused the refresh token). Run \`agentloop mcp login secure\` in a terminal.`,
        isError: true,
      });
    } finally {
      await toolset.close();
    }
  });
});
