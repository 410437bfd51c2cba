// OAuth sign-in to remote MCP servers through the real CLI, against an authorization server of our
// own (test/support/oauth-server.ts); test/support/fake-browser.mjs stands in for the browser.
import { generateKeyPairSync } from "node:crypto";
import { chmodSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
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

const workspace = oauthWorkspace;

/** A scripted model that calls `whoami`, then answers with what it said. */
async function whoamiModel() {
  model = await startFakeOpenAIServer({
    respond: [{ toolCalls: [{ name: "whoami", arguments: {} }] }, { text: "ada is signed in" }],
  });
  return { OPENAI_BASE_URL: model.url, OPENAI_API_KEY: "sk-test" };
}

const run = (dir: string, env: Record<string, string>) =>
  runCli(["run", "--no-builtin-tools", "Who is signed in?"], { cwd: dir, env });

// Each test starts several CLI processes: more than the default limit on a loaded machine.
describe("agentloop mcp login and runs against an OAuth-protected server", { timeout: 60_000 }, () => {
  it("signs in ahead of time with discovery, registration, PKCE and the resource; later runs without a terminal use the token", async () => {
    const as = await startOAuthServer();
    const w = workspace({ secure: { url: as.url } });
    const login = await runCli(["mcp", "login", "secure"], { cwd: w.dir, env: w.env });
    expect(login.code).toBe(0);
    const lines = login.stderr.trim().split("\n");
    expect(lines[0]).toBe("agentloop: sign in to MCP server 'secure' in your browser:");
    expect(lines.at(-1)).toBe("agentloop: signed in to MCP server 'secure' (1 tool).");
    const opened = new URL(w.visited()[0] ?? "");
    expect(lines[1]).toBe(`  ${opened}`);
    expect(opened.origin + opened.pathname).toBe(`${as.origin}/authorize`);
    expect(Object.fromEntries(opened.searchParams)).toMatchObject({
      response_type: "code",
      code_challenge_method: "S256",
      resource: as.url,
      scope: "tools:read offline_access",
    });
    expect(new URL(opened.searchParams.get("redirect_uri") ?? "").hostname).toBe("127.0.0.1");
    expect(as.log.map((entry) => entry.path)).toEqual(
      expect.arrayContaining([
        "/.well-known/oauth-protected-resource/mcp",
        "/register",
        "/authorize",
        "/token",
      ]),
    );
    expect(as.log.find((entry) => entry.path === "/token")?.params).toMatchObject({
      grant_type: "authorization_code",
      resource: as.url,
    });

    const [file] = w.files();
    expect(w.files()).toHaveLength(1);
    expect(statSync(file as string).mode & 0o777).toBe(0o600);
    expect(statSync(w.tokens).mode & 0o777).toBe(0o700);
    expect(readFileSync(file as string, "utf8")).toContain(as.issued[0]);

    const answer = await run(w.dir, { ...w.env, ...(await whoamiModel()) });
    expect(answer.code).toBe(0);
    expect(answer.stdout).toBe("ada is signed in\n");
    expect(model?.requests[1]?.body.messages.at(-1).content).toContain("signed in as ada");
    for (const secret of as.issued)
      expect(login.stderr + answer.stdout + answer.stderr).not.toContain(secret);
  });

  it("refreshes an expired access token, and names `agentloop mcp login` once the refresh token is refused too", async () => {
    const as = await startOAuthServer();
    const w = workspace({ secure: { url: as.url } });
    expect((await runCli(["mcp", "login", "secure"], { cwd: w.dir, env: w.env })).code).toBe(0);

    as.expireAccessTokens();
    const refreshed = await run(w.dir, { ...w.env, ...(await whoamiModel()) });
    expect(refreshed.code).toBe(0);
    expect(refreshed.stdout).toBe("ada is signed in\n");
    expect(as.log.at(-1)?.params).toMatchObject({ grant_type: "refresh_token", resource: as.url });
    expect(readFileSync(w.files()[0] as string, "utf8")).toContain(as.issued.at(-2));

    as.expireAccessTokens();
    as.knobs.refuseRefresh = true;
    const expired = await run(w.dir, { ...w.env, ...(await whoamiModel()) });
    expect(expired.code).toBe(2);
    expect(expired.stderr).toBe(
      `agentloop: MCP server 'secure' (agentloop.json) failed to start: the sign-in to ${as.url} has expired (the authorization server refused the refresh token). Run \`agentloop mcp login secure\` in a terminal, or mark it "optional": true.\n`,
    );
    for (const secret of as.issued) expect(expired.stderr).not.toContain(secret);
  });

  it("without a terminal and without a token, stops before registering and names `agentloop mcp login`", async () => {
    const as = await startOAuthServer();
    const w = workspace({ secure: { url: as.url } });
    const refused = await run(w.dir, { ...w.env, ...(await whoamiModel()) });
    expect(refused.code).toBe(2);
    expect(refused.stderr).toBe(
      `agentloop: MCP server 'secure' (agentloop.json) failed to start: ${as.url} needs a sign-in (OAuth) and no token is stored. Run \`agentloop mcp login secure\` in a terminal, or mark it "optional": true.\n`,
    );
    expect(as.log.map((entry) => entry.path)).not.toContain("/register");
    expect(model?.requests).toHaveLength(0);
  });

  it("in a terminal, a run signs in when the server asks, then answers", async () => {
    const as = await startOAuthServer();
    const w = workspace({ secure: { url: as.url } });
    const env = { ...w.env, ...(await whoamiModel()) };
    const session = terminal(["run", "--no-builtin-tools", "Who is signed in?"], { cwd: w.dir, env });
    expect(await session.exited).toBe(0);
    expect(session.output).toContain("agentloop: sign in to MCP server 'secure' in your browser:");
    expect(session.output).toContain("ada is signed in");
    expect(w.files()).toHaveLength(1);
  });

  it("signs in as a machine with client_credentials and a private_key_jwt assertion", async () => {
    const { publicKey, privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
    const as = await startOAuthServer({
      client: { id: "robot", publicKeyPem: publicKey.export({ type: "spki", format: "pem" }).toString() },
    });
    const w = workspace({
      secure: {
        url: as.url,
        oauth: {
          clientId: "robot",
          privateKeyFile: "robot.pem",
          grant: "client_credentials",
          scope: "tools:read",
        },
      },
    });
    writeFileSync(join(w.dir, "robot.pem"), privateKey.export({ type: "pkcs8", format: "pem" }));
    const answer = await run(w.dir, { ...w.env, ...(await whoamiModel()) });
    expect(answer.stderr).toBe("");
    expect(answer.code).toBe(0);
    const request = as.log.find((entry) => entry.path === "/token");
    expect(request?.params).toMatchObject({
      grant_type: "client_credentials",
      scope: "tools:read",
      resource: as.url,
    });
    expect(as.log.map((entry) => entry.path)).not.toContain("/register");
  });
});

describe("bad input, each one clear line and no secret", { timeout: 60_000 }, () => {
  it("refuses protected resource metadata naming another resource, before any authorization", async () => {
    const as = await startOAuthServer({ resource: "https://elsewhere.example/mcp" });
    const w = workspace({ secure: { url: as.url } });
    const login = await runCli(["mcp", "login", "secure"], { cwd: w.dir, env: w.env });
    expect(login.code).toBe(2);
    expect(login.stderr).toBe(
      `agentloop: MCP server 'secure' (agentloop.json) failed to start: its OAuth metadata names another resource (https://elsewhere.example/mcp, not ${as.url}): agentloop refuses to sign in for it. Check its "url", or the server's protected resource metadata, or mark it "optional": true.\n`,
    );
    expect(as.log.map((entry) => entry.path)).not.toContain("/authorize");
  });

  it("refuses authorization server metadata whose issuer is not the server it was fetched for (RFC 8414 3.3)", async () => {
    const as = await startOAuthServer({ issuer: "https://evil.example" });
    const w = workspace({ secure: { url: as.url } });
    const login = await runCli(["mcp", "login", "secure"], { cwd: w.dir, env: w.env });
    expect([login.code, login.stderr]).toEqual([
      2,
      `agentloop: MCP server 'secure' (agentloop.json) failed to start: the authorization server metadata fetched for ${as.origin} names another issuer, https://evil.example: agentloop refuses to sign in with it. Check the authorization server's "issuer", or mark it "optional": true.\n`,
    ]);
    expect(as.log.map((entry) => entry.path)).not.toContain("/register");
    expect(w.visited).toThrow(); // no browser was opened

    // Without protected resource metadata (2025-03-26), the MCP server's origin is the authorization
    // server: an issuer elsewhere is refused, one on that origin (with a path, as servers of then did) is not.
    as.knobs.resourceMetadata = false;
    const legacy = await runCli(["mcp", "login", "secure"], { cwd: w.dir, env: w.env });
    expect(legacy.stderr).toContain(
      `the authorization server metadata fetched for ${as.origin}/ names another issuer, https://evil.example: agentloop refuses`,
    );
    as.knobs.issuer = `${as.origin}/oauth`;
    const ok = await runCli(["mcp", "login", "secure"], { cwd: w.dir, env: w.env });
    expect([ok.code, ok.stderr.trim().split("\n").at(-1)]).toEqual([
      0,
      "agentloop: signed in to MCP server 'secure' (1 tool).",
    ]);
  });

  it("names malformed authorization server metadata", async () => {
    const as = await startOAuthServer();
    as.knobs.metadata = { issuer: as.origin, authorization_endpoint: `${as.origin}/authorize` };
    const w = workspace({ secure: { url: as.url } });
    const login = await runCli(["mcp", "login", "secure"], { cwd: w.dir, env: w.env });
    expect(login.code).toBe(2);
    expect(login.stderr).toMatch(
      new RegExp(
        `^agentloop: MCP server 'secure' \\(agentloop.json\\) failed to start: the OAuth answer of ${as.origin}/.well-known/oauth-authorization-server is malformed \\(token_endpoint: [^\\n]+\\)\\. Check the authorization server, or mark it "optional": true\\.\\n$`,
      ),
    );
  });

  it("refuses a registration whose callback is not on this machine, and a browser answer with a forged state", async () => {
    const as = await startOAuthServer({ registeredRedirects: ["https://collector.example/callback"] });
    const w = workspace({ secure: { url: as.url } });
    const elsewhere = await runCli(["mcp", "login", "secure"], { cwd: w.dir, env: w.env });
    expect(elsewhere.code).toBe(2);
    expect(elsewhere.stderr).toBe(
      `agentloop: MCP server 'secure' (agentloop.json) failed to start: its authorization server registered agentloop with the callback https://collector.example/callback, which is not on this machine, so the sign-in would go elsewhere. Check the authorization server: agentloop only receives sign-ins on 127.0.0.1, or mark it "optional": true.\n`,
    );

    as.knobs.registeredRedirects = undefined;
    const forged = await runCli(["mcp", "login", "secure"], {
      cwd: w.dir,
      env: { ...w.env, FAKE_BROWSER_STATE: "forged" },
    });
    expect(forged.code).toBe(2);
    expect(forged.stderr.trim().split("\n").at(-1)).toBe(
      `agentloop: MCP server 'secure' (agentloop.json) failed to start: the browser came back with another state than agentloop sent (a stale or forged redirect). Run \`agentloop mcp login secure\` to try again, or mark it "optional": true.`,
    );
    expect(as.log.map((entry) => entry.path)).not.toContain("/token");
  });

  it("warns about a token file others can read, and stops on one it cannot read", async () => {
    const as = await startOAuthServer();
    const w = workspace({ secure: { url: as.url } });
    expect((await runCli(["mcp", "login", "secure"], { cwd: w.dir, env: w.env })).code).toBe(0);
    const file = w.files()[0] as string;
    chmodSync(file, 0o644);
    const open = await run(w.dir, { ...w.env, ...(await whoamiModel()) });
    expect(open.code).toBe(0);
    expect(open.stderr).toBe(
      `agentloop: warning: the token file ${file} can be read by other users: run chmod 600 ${file} (agentloop writes it 0600).\n`,
    );

    // A file that cannot be used gets its error alone, not also the warning (it is still 0644).
    writeFileSync(file, "{ not json");
    const garbled = await run(w.dir, { ...w.env, ...(await whoamiModel()) });
    expect(garbled.code).toBe(2);
    expect(garbled.stderr).toBe(
      `agentloop: MCP server 'secure' (agentloop.json) failed to start: the token file ${file} is not one agentloop wrote. Delete it, then run \`agentloop mcp login secure\`, or mark it "optional": true.\n`,
    );

    rmSync(file);
    mkdirSync(file, { mode: 0o755 });
    const folder = await run(w.dir, { ...w.env, ...(await whoamiModel()) });
    expect([folder.code, folder.stderr]).toEqual([
      2,
      `agentloop: MCP server 'secure' (agentloop.json) failed to start: the token file ${file} is a directory. Delete it (rm -r ${file}), then run \`agentloop mcp login secure\`, or mark it "optional": true.\n`,
    ]);
    const login = await runCli(["mcp", "login", "secure"], { cwd: w.dir, env: w.env });
    expect([login.code, login.stderr]).toEqual([
      2,
      `agentloop: the token file ${file} is a directory: delete it (rm -r ${file}).\n`,
    ]);
  });

  it("checks the oauth settings of the config, one line per problem", async () => {
    const cases: [unknown, string][] = [
      [
        { clientID: "x" },
        `unknown key 'mcpServers.s.oauth.clientID' in agentloop.json: did you mean 'clientId'?`,
      ],
      [{ grant: "password" }, `'mcpServers.s.oauth.grant' in agentloop.json is invalid:`],
      [
        { clientSecret: "hunter22" },
        `'mcpServers.s.oauth' in agentloop.json has a "clientSecret" but no "clientId": add the client it belongs to.`,
      ],
      [
        { clientId: "a", clientSecret: "hunter22", privateKeyFile: "k.pem" },
        `'mcpServers.s.oauth' in agentloop.json has both "clientSecret" and "privateKeyFile": keep the one the authorization server expects.`,
      ],
      [
        { clientId: "a", grant: "client_credentials" },
        `'mcpServers.s.oauth' in agentloop.json uses "grant": "client_credentials", which needs "clientId" and "clientSecret" or "privateKeyFile".`,
      ],
    ];
    for (const [oauth, line] of cases) {
      const w = workspace({ s: { url: "http://127.0.0.1:9/mcp", oauth } });
      const result = await runCli(["tools"], { cwd: w.dir, env: w.env });
      expect(result.code).toBe(2);
      expect(result.stderr).toContain(`agentloop: ${line}`);
      expect(result.stderr.trim().split("\n")).toHaveLength(1);
      expect(result.stderr).not.toContain("hunter22");
    }
    const header = workspace({
      s: { url: "http://127.0.0.1:9/mcp", headers: { Authorization: "Bearer x" }, oauth: { scope: "a" } },
    });
    expect((await runCli(["tools"], { cwd: header.dir, env: header.env })).stderr).toBe(
      `agentloop: 'mcpServers.s.oauth' in agentloop.json comes with an "Authorization" header: keep one of them (the header wins over a sign-in).\n`,
    );
    const key = workspace({
      s: { url: "http://127.0.0.1:9/mcp", oauth: { clientId: "a", privateKeyFile: "missing.pem" } },
    });
    expect((await runCli(["tools"], { cwd: key.dir, env: key.env })).stderr).toBe(
      `agentloop: MCP server 's' (agentloop.json) failed to start: its private key ${join(key.dir, "missing.pem")} cannot be read (ENOENT). Check its "oauth.privateKeyFile", or mark it "optional": true.\n`,
    );
    // A relative key file is found next to its config file, wherever agentloop runs.
    mkdirSync(join(key.dir, "elsewhere"));
    const moved = await runCli(["tools", "--config", "../agentloop.json"], {
      cwd: join(key.dir, "elsewhere"),
      env: key.env,
    });
    expect(moved.stderr).toContain(`its private key ${join(key.dir, "missing.pem")} cannot be read`);
  });

  it("mcp login names an unknown server and one that cannot sign in", async () => {
    const w = workspace({
      local: { command: "node" },
      fixed: { url: "http://127.0.0.1:9/mcp", headers: { Authorization: "Bearer x" } },
    });
    mkdirSync(join(w.dir, "sub"));
    const none = await runCli(["mcp", "login", "nope"], { cwd: join(w.dir, "sub"), env: w.env });
    expect([none.code, none.stderr]).toEqual([
      2,
      `agentloop: no config file found (agentloop.json in the working directory), so no MCP server 'nope': create one with {"mcpServers": {"nope": {"url": "https://…"}}}, or pass --config <file>.\n`,
    ]);
    const unknown = await runCli(["mcp", "login", "nope"], { cwd: w.dir, env: w.env });
    expect([unknown.code, unknown.stderr]).toEqual([
      2,
      `agentloop: no MCP server 'nope' in agentloop.json (it has 'local', 'fixed'): check the name, or pass --config.\n`,
    ]);
    const local = await runCli(["mcp", "login", "local"], { cwd: w.dir, env: w.env });
    expect(local.stderr).toBe(
      `agentloop: MCP server 'local' in agentloop.json is a local (stdio) server: only remote ("url") servers sign in.\n`,
    );
    const fixed = await runCli(["mcp", "login", "fixed"], { cwd: w.dir, env: w.env });
    expect(fixed.stderr).toBe(
      `agentloop: MCP server 'fixed' in agentloop.json sends its own "Authorization" header: remove it to sign in with OAuth.\n`,
    );
  });
});
