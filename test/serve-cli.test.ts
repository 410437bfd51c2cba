import { mkdtempSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { afterEach, describe, expect, it } from "vitest";
import { type FakeOpenAIServer, startFakeOpenAIServer } from "../src/testing/fake-openai-server.js";
import { runCli } from "./helpers.js";
import { rawRequest, startServe } from "./support/serve-process.js";

let upstream: FakeOpenAIServer | undefined;
let blocker: Server | undefined;
afterEach(async () => {
  await upstream?.close();
  await new Promise((resolve) => (blocker ? blocker.close(resolve) : resolve(undefined)));
  blocker = undefined;
});

const UPSTREAM_KEY = "sk-upstream-0123456789";
const LOCAL_KEY = "local-key-abcdef";

describe("agentloop serve", () => {
  it("serves the official client on 127.0.0.1 with auth, logs one line per request, and shuts down on SIGTERM", async () => {
    upstream = await startFakeOpenAIServer({
      respond: [
        { toolCalls: [{ name: "calculator", arguments: { expression: "157.09 * 493.89" } }] },
        { text: "It is 77585.1801." },
        { text: "Again." },
      ],
    });
    const serve = startServe({
      OPENAI_BASE_URL: upstream.url,
      OPENAI_API_KEY: UPSTREAM_KEY,
      AGENTLOOP_API_KEY: LOCAL_KEY,
    });
    const url = await serve.url();
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect((await fetch(`${url}/v1/models`)).status).toBe(401);
    // With a key, the metrics need it too.
    expect((await fetch(`${url}/metrics`)).status).toBe(401);
    const metrics = await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${LOCAL_KEY}` } });
    expect(metrics.status).toBe(200);
    // The scheme in any case, with extra spaces (RFC 9110).
    for (const authorization of [`bearer  ${LOCAL_KEY}`, `BEARER ${LOCAL_KEY}`]) {
      expect((await fetch(`${url}/v1/models`, { headers: { authorization } })).status, authorization).toBe(
        200,
      );
    }

    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: LOCAL_KEY, maxRetries: 0 });
    const stream = await client.chat.completions.create({
      model: "gpt-4o-mini",
      messages: [{ role: "user", content: "157.09 * 493.89? BODY-MARKER" }],
      stream: true,
    });
    let text = "";
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? "";
    expect(text).toBe("It is 77585.1801.");
    const completion = await client.chat.completions.create({
      model: "gpt-4o-mini",
      messages: [{ role: "user", content: "again BODY-MARKER" }],
    });
    expect(completion.choices[0]?.message.content).toBe("Again.");
    await expect(
      client.chat.completions.create({ model: "nope", messages: [{ role: "user", content: "x" }] }),
    ).rejects.toMatchObject({ status: 404 });

    serve.child.kill("SIGTERM");
    expect(await serve.exited).toBe(0);
    const log = serve.stderr();
    const requests = log.split("\n").filter((line) => /^agentloop: (GET|POST) /.test(line));
    expect(requests).toEqual([
      expect.stringMatching(/^agentloop: GET \/v1\/models 401 \d+ms$/),
      expect.stringMatching(/^agentloop: GET \/metrics 401 \d+ms$/),
      expect.stringMatching(/^agentloop: GET \/metrics 200 \d+ms$/),
      expect.stringMatching(/^agentloop: GET \/v1\/models 200 \d+ms$/),
      expect.stringMatching(/^agentloop: GET \/v1\/models 200 \d+ms$/),
      expect.stringMatching(/^agentloop: POST \/v1\/chat\/completions 200 \d+ms final_answer$/),
      expect.stringMatching(/^agentloop: POST \/v1\/chat\/completions 200 \d+ms final_answer$/),
      expect.stringMatching(/^agentloop: POST \/v1\/chat\/completions 404 \d+ms$/),
    ]);
    for (const secret of [UPSTREAM_KEY, LOCAL_KEY, "BODY-MARKER", "uthorization"])
      expect(log).not.toContain(secret);
  });

  it("refuses to bind beyond loopback without AGENTLOOP_API_KEY (exit 2) unless --no-auth says so", async () => {
    upstream = await startFakeOpenAIServer({ respond: () => ({ text: "open" }) });
    const env = { OPENAI_BASE_URL: upstream.url, OPENAI_API_KEY: UPSTREAM_KEY };
    const refused = await runCli(["serve", "--host", "0.0.0.0", "--port", "0"], { env });
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/^agentloop: .*AGENTLOOP_API_KEY.*--no-auth.*\n$/);
    const both = await runCli(["serve", "--host", "0.0.0.0", "--no-auth"], {
      env: { ...env, AGENTLOOP_API_KEY: LOCAL_KEY },
    });
    expect(both.code).toBe(2);
    expect(both.stderr).toMatch(/^agentloop: --no-auth .*AGENTLOOP_API_KEY.*\n$/);

    const open = startServe(env, ["--host", "0.0.0.0", "--no-auth"]);
    const [, port] = await open.waitFor(/on http:\/\/0\.0\.0\.0:(\d+) /);
    await open.waitFor(/warning: --no-auth: anyone who can reach/);
    const res = await fetch(`http://127.0.0.1:${port}/v1/models`);
    expect(res.status).toBe(200);
    open.child.kill("SIGTERM");
    expect(await open.exited).toBe(0);
  });

  it("names the option at fault (exit 2) when the port is in use, the host does not resolve or --cors is not an origin", async () => {
    upstream = await startFakeOpenAIServer({ respond: () => ({ text: "unused" }) });
    const env = { OPENAI_BASE_URL: upstream.url, OPENAI_API_KEY: UPSTREAM_KEY };
    const busy = createServer();
    blocker = busy;
    await new Promise<void>((resolve) => busy.listen(0, "127.0.0.1", resolve));
    const port = String((busy.address() as { port: number }).port);
    const cwd = mkdtempSync(join(tmpdir(), "agentloop-serve-"));
    const inUse = await runCli(["serve", "--port", port], { env, cwd });
    expect(inUse.code).toBe(2);
    expect(inUse.stderr).toBe(
      `agentloop: --port ${port} is in use on 127.0.0.1: pass another --port (0 picks a free one).\n`,
    );

    const nowhere = await runCli(["serve", "--port", "0", "--host", "no-such-host.invalid"], {
      env: { ...env, AGENTLOOP_API_KEY: LOCAL_KEY },
      cwd,
    });
    expect(nowhere.code).toBe(2);
    expect(nowhere.stderr).toMatch(
      /^agentloop: --host no-such-host\.invalid (does not resolve|could not be resolved)[^\n]*\n$/,
    );

    const cors = await runCli(["serve", "--port", "0", "--cors", "https://app.example/path"], { env });
    expect(cors.code).toBe(2);
    expect(cors.stderr).toMatch(
      /^agentloop: --cors: 'https:\/\/app\.example\/path' is not an origin[^\n]*\n$/,
    );
    const timeout = await runCli(["serve", "--drain-timeout", "soon"], { env });
    expect(timeout.code).toBe(2);
    expect(timeout.stderr).toContain("--drain-timeout must be a positive number");
  });
});

describe("agentloop serve, refusing requests from elsewhere", () => {
  it("on loopback refuses a Host that is not localhost, 127.0.0.1 or [::1] (DNS rebinding)", async () => {
    upstream = await startFakeOpenAIServer({ respond: () => ({ text: "hi" }) });
    const serve = startServe({ OPENAI_BASE_URL: upstream.url, OPENAI_API_KEY: UPSTREAM_KEY });
    const url = await serve.url();
    const { port } = new URL(url);
    const evil = await rawRequest(url, { path: "/v1/models", headers: { host: `evil.example:${port}` } });
    expect(evil.status).toBe(403);
    expect(JSON.parse(evil.body)).toMatchObject({
      error: { type: "permission_error", code: "host_not_allowed" },
    });
    const page = await rawRequest(url, { path: "/", headers: { host: `evil.example:${port}` } });
    expect(page.status).toBe(403);
    for (const host of [`localhost:${port}`, `127.0.0.1:${port}`, `[::1]:${port}`]) {
      expect((await rawRequest(url, { path: "/v1/models", headers: { host } })).status, host).toBe(200);
    }
  });

  it("binds an IPv6 loopback written bare or in brackets, prints a URL that works, and takes [::1]:port as its own Host and Origin", async () => {
    upstream = await startFakeOpenAIServer({ respond: () => ({ text: "over IPv6" }) });
    const env = { OPENAI_BASE_URL: upstream.url, OPENAI_API_KEY: UPSTREAM_KEY };
    for (const host of ["[::1]", "::1"]) {
      const serve = startServe(env, ["--host", host]);
      const url = await serve.url();
      expect(url, host).toMatch(/^http:\/\/\[::1\]:\d+$/);
      const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: "unused", maxRetries: 0 });
      const completion = await client.chat.completions.create({
        model: "gpt-4o-mini",
        messages: [{ role: "user", content: "hi" }],
      });
      expect(completion.choices[0]?.message.content).toBe("over IPv6");
      // The web chat's own requests: Host and Origin both [::1]:port.
      const own = await fetch(`${url}/v1/models`, { headers: { origin: url } });
      expect(own.status, host).toBe(200);
      const { port } = new URL(url);
      const evil = await rawRequest(url, { path: "/v1/models", headers: { host: `evil.example:${port}` } });
      expect(evil.status).toBe(403);
      serve.child.kill("SIGTERM");
      expect(await serve.exited).toBe(0);
    }
    const bad = await runCli(["serve", "--port", "0", "--host", "[localhost]"], { env });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/^agentloop: --host \[localhost\]: brackets hold an IPv6 address[^\n]*\n$/);
  });

  it("refuses cross-origin browser requests (403) unless --cors allows the origin", async () => {
    upstream = await startFakeOpenAIServer({ respond: () => ({ text: "hi" }) });
    const serve = startServe({ OPENAI_BASE_URL: upstream.url, OPENAI_API_KEY: UPSTREAM_KEY }, [
      "--cors",
      "http://app.example:3000, https://other.example",
    ]);
    const url = await serve.url();
    const post = (headers: Record<string, string>) =>
      fetch(`${url}/v1/chat/completions`, {
        method: "POST",
        headers,
        body: JSON.stringify({ messages: [{ role: "user", content: "hi" }] }),
      });
    // What a page elsewhere can send without a preflight: refused for its origin, and for its type.
    const forged = await post({ origin: "http://evil.example", "content-type": "text/plain" });
    expect(forged.status).toBe(403);
    expect(await forged.json()).toMatchObject({ error: { code: "origin_not_allowed" } });
    expect((await post({ "content-type": "text/plain" })).status).toBe(415);
    expect((await post({ "content-type": "application/json", "sec-fetch-site": "cross-site" })).status).toBe(
      403,
    );

    const preflight = await fetch(`${url}/v1/chat/completions`, {
      method: "OPTIONS",
      headers: { origin: "http://app.example:3000", "access-control-request-method": "POST" },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get("access-control-allow-origin")).toBe("http://app.example:3000");
    const allowed = await post({ origin: "http://app.example:3000", "content-type": "application/json" });
    expect(allowed.status).toBe(200);
    expect(allowed.headers.get("access-control-allow-origin")).toBe("http://app.example:3000");
    const own = await post({ origin: url, "content-type": "application/json" });
    expect(own.status).toBe(200);
    const page = await fetch(url);
    expect(page.headers.get("x-frame-options")).toBe("DENY");
    expect(page.headers.get("content-security-policy")).toContain("default-src 'none'");
  });
});
