import { createHash } from "node:crypto";
import type { AddressInfo } from "node:net";
import { createServer } from "node:net";
import { describe, expect, it } from "vitest";
import { Agent } from "../src/index.js";
import { openAIChatModel } from "../src/models/openai-chat.js";
import { openAIResponsesModel } from "../src/models/openai-responses.js";
import { type AgentServer, createApp } from "../src/server/index.js";
import { scriptedModel } from "../src/testing/index.js";

const user = (content: string) => ({ messages: [{ role: "user" as const, content }] });
const answering = (text = "hi") => new Agent({ model: scriptedModel(() => ({ text })) });

interface ErrorBody {
  error: { message: string; type: string; code: string | null; param: string | null };
}
const errorOf = async (res: Response) => ((await res.json()) as ErrorBody).error;

/** A request as a browser on `origin` (or another client) would send it to http://127.0.0.1:8787. */
const request = (server: AgentServer, path: string, init: RequestInit = {}) =>
  server.app.request(`http://127.0.0.1:8787${path}`, init);
const chat = (server: AgentServer, headers: Record<string, string>, body: unknown = user("hi")) =>
  request(server, "/v1/chat/completions", {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });

describe("server: cross-origin requests", () => {
  it("refuses browser requests from other origins (403) and takes its own page's, curl's and SDKs'", async () => {
    const server = createApp({ agents: { a: answering() } });
    // A page elsewhere posting text/plain (no preflight) was enough to run the agent.
    const simple = await chat(server, { origin: "http://evil.example", "content-type": "text/plain" });
    expect(simple.status).toBe(403);
    expect(await errorOf(simple)).toMatchObject({ type: "permission_error", code: "origin_not_allowed" });
    for (const origin of ["http://evil.example", "null", "http://127.0.0.1:9999", "http://localhost:8787"]) {
      expect((await chat(server, { origin })).status, origin).toBe(403);
      expect((await request(server, "/v1/models", { headers: { origin } })).status, origin).toBe(403);
      expect((await request(server, "/metrics", { headers: { origin } })).status, origin).toBe(403);
    }
    // An image or script tag elsewhere sends no Origin, but Sec-Fetch-Site tells.
    for (const site of ["cross-site", "same-site"]) {
      const res = await request(server, "/v1/models", {
        headers: { "sec-fetch-site": site, "sec-fetch-mode": "no-cors" },
      });
      expect(res.status, site).toBe(403);
    }
    // Its own page, a link to the page from elsewhere, and clients that are not browsers are fine.
    expect(
      (await chat(server, { origin: "http://127.0.0.1:8787", "sec-fetch-site": "same-origin" })).status,
    ).toBe(200);
    const link = await request(server, "/", {
      headers: { "sec-fetch-site": "cross-site", "sec-fetch-mode": "navigate" },
    });
    expect(link.status).toBe(200);
    expect((await chat(server, {})).status).toBe(200);
    // No CORS headers for anyone unless allowed.
    expect((await chat(server, {})).headers.get("access-control-allow-origin")).toBeNull();
  });

  it("allows the --cors origins through Hono's cors: preflight answered, headers set", async () => {
    const server = createApp({
      agents: { a: answering() },
      corsOrigins: ["https://app.example"],
      apiKey: "k3y-value",
    });
    const preflight = await request(server, "/v1/chat/completions", {
      method: "OPTIONS",
      headers: {
        origin: "https://app.example",
        "access-control-request-method": "POST",
        "access-control-request-headers": "authorization, content-type",
      },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get("access-control-allow-origin")).toBe("https://app.example");
    expect(preflight.headers.get("access-control-allow-methods")).toContain("POST");
    expect(preflight.headers.get("access-control-allow-headers")).toBe("authorization,content-type");
    const res = await chat(server, { origin: "https://app.example", authorization: "Bearer k3y-value" });
    expect(res.status).toBe(200);
    expect(res.headers.get("access-control-allow-origin")).toBe("https://app.example");
    expect(res.headers.get("vary")).toContain("Origin");
    // The key is still required, and other origins are still refused.
    expect((await chat(server, { origin: "https://app.example" })).status).toBe(401);
    expect(
      (await chat(server, { origin: "https://other.example", authorization: "Bearer k3y-value" })).status,
    ).toBe(403);
    const any = createApp({ agents: { a: answering() }, corsOrigins: ["*"] });
    const open = await chat(any, { origin: "https://whoever.example" });
    expect(open.status).toBe(200);
    expect(open.headers.get("access-control-allow-origin")).toBe("*");
  });

  it("answers a POST body that is not declared JSON with 415", async () => {
    const server = createApp({ agents: { a: answering() } });
    for (const type of [
      "text/plain",
      "application/x-www-form-urlencoded",
      "multipart/form-data; boundary=x",
      "",
    ]) {
      const res = await chat(server, { "content-type": type });
      expect(res.status, type).toBe(415);
      expect(await errorOf(res), type).toMatchObject({
        type: "invalid_request_error",
        code: "invalid_content_type",
      });
    }
    expect((await chat(server, { "content-type": "application/json; charset=utf-8" })).status).toBe(200);
  });
});

describe("server: headers, keys and secrets", () => {
  it("sends security headers, and a CSP on the page that allows only the page's own script and style", async () => {
    const server = createApp({ agents: { a: answering() } });
    const page = await request(server, "/");
    for (const res of [page, await request(server, "/v1/models"), await chat(server, {})]) {
      expect(res.headers.get("x-content-type-options")).toBe("nosniff");
      expect(res.headers.get("referrer-policy")).toBe("no-referrer");
      expect(res.headers.get("x-frame-options")).toBe("DENY");
    }
    const csp = page.headers.get("content-security-policy") ?? "";
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).not.toContain("unsafe-inline");
    const html = await page.text();
    const scripts = [...html.matchAll(/<script>([\s\S]*?)<\/script>/g)].map((m) => m[1] as string);
    const styles = [...html.matchAll(/<style>([\s\S]*?)<\/style>/g)].map((m) => m[1] as string);
    expect(scripts).toHaveLength(1);
    const sha = (text: string) => `'sha256-${createHash("sha256").update(text).digest("base64")}'`;
    expect(csp).toContain(`script-src ${sha(scripts[0] as string)}`);
    expect(csp).toContain(`style-src ${sha(styles[0] as string)}`);
    expect(html).not.toMatch(/localStorage|sessionStorage|innerHTML|\son\w+=/);
  });

  it("accepts the Bearer scheme in any case and with extra spaces (RFC 9110), and guards /metrics too", async () => {
    const server = createApp({ agents: { a: answering() }, apiKey: "s3cret-key" });
    for (const authorization of [
      "Bearer s3cret-key",
      "bearer  s3cret-key",
      "BEARER s3cret-key",
      "Bearer s3cret-key  ",
    ]) {
      expect(
        (await request(server, "/v1/models", { headers: { authorization } })).status,
        authorization,
      ).toBe(200);
    }
    const refused = await request(server, "/metrics");
    expect(refused.status).toBe(401);
    expect(refused.headers.get("www-authenticate")).toBe("Bearer");
    expect(
      (await request(server, "/metrics", { headers: { authorization: "Bearer s3cret-key" } })).status,
    ).toBe(200);
    for (const path of ["/", "/healthz"]) expect((await request(server, path)).status, path).toBe(200);
  });

  it("answers models named like Object.prototype members with 404, streaming or not, leaking no run", async () => {
    const server = createApp({ agents: { a: answering() } });
    for (const model of ["constructor", "__proto__", "toString", "hasOwnProperty", "valueOf"]) {
      for (const stream of [false, true]) {
        const res = await chat(server, {}, { model, ...user("hi"), stream });
        expect(res.status, `${model} ${stream}`).toBe(404);
        expect(await errorOf(res)).toMatchObject({ code: "model_not_found", param: "model" });
      }
      expect((await request(server, `/v1/models/${model}`)).status, model).toBe(404);
    }
    expect(await (await request(server, "/metrics")).text()).toContain("agentloop_requests_in_flight 0");
    await server.idle();
  });

  it("keeps the API keys out of error bodies, error chunks and log lines", async () => {
    const upstreamKey = "sk-upstream-abcdef123456";
    const localKey = "local-key-0987";
    const lines: string[] = [];
    const leaky = new Agent({
      model: scriptedModel(() => ({
        // A 500 (a 401 is not told to clients at all): its message reaches them, redacted.
        error: {
          code: "http_500",
          message: `Upstream failed with ${upstreamKey} (local ${localKey})`,
        },
      })),
    });
    // A bug in the run (a model that breaks its contract and throws mid-reply): an internal error.
    const throwing = new Agent({
      model: {
        id: "broken",
        async *stream() {
          yield { type: "text_delta", text: "h" };
          throw new Error(`model failed with ${upstreamKey} and ${localKey}`);
        },
      },
    });
    // onEvent must not throw; when it does, the run goes on.
    const hooked = new Agent({
      model: scriptedModel(() => ({ text: "hi" })),
      onEvent: (event) => {
        if (event.type === "turn_complete")
          throw new Error(`hook failed with ${upstreamKey} and ${localKey}`);
      },
    });
    const server = createApp({
      agents: { leaky, throwing, hooked },
      apiKey: localKey,
      secrets: [upstreamKey],
      log: (line) => lines.push(line),
    });
    const auth = { authorization: `Bearer ${localKey}` };
    const bodies = [
      await chat(server, auth, { model: "leaky", ...user("hi") }),
      await chat(server, auth, { model: "leaky", ...user("hi"), stream: true }),
      await chat(server, auth, { model: "throwing", ...user("hi") }),
      await chat(server, auth, { model: "throwing", ...user("hi"), stream: true }),
    ];
    const [leak502, leakStream, hook500, hookStream] = await Promise.all(bodies.map((r) => r.text()));
    expect(bodies.map((r) => r.status)).toEqual([502, 502, 500, 200]);
    expect(leak502).toContain("Upstream failed with [REDACTED]");
    expect(hookStream).toContain('"code":"internal_error"');
    const hooked200 = await chat(server, auth, { model: "hooked", ...user("hi") });
    expect(hooked200.status).toBe(200);
    expect(await hooked200.json()).toMatchObject({ choices: [{ message: { content: "hi" } }] });
    for (const text of [leak502, leakStream, hook500, hookStream, lines.join("\n")]) {
      expect(text).not.toContain(upstreamKey);
      expect(text).not.toContain(localKey);
    }
  });

  it("never tells a remote client where the upstream model API is: a refused connection is logged, not sent", async () => {
    // A port nothing listens on (taken, then closed), behind both real OpenAI adapters.
    const port = await new Promise<number>((resolve) => {
      const probe = createServer().listen(0, "127.0.0.1", () => {
        const { port } = probe.address() as AddressInfo;
        probe.close(() => resolve(port));
      });
    });
    const upstream = `http://127.0.0.1:${port}/v1`;
    const options = { model: "gpt-4o-mini", baseURL: upstream, apiKey: "sk-up-1234", maxRetries: 0 };
    const lines: string[] = [];
    const server = createApp({
      agents: {
        chat: new Agent({ model: openAIChatModel(options) }),
        responses: new Agent({ model: openAIResponsesModel(options) }),
      },
      log: (line) => lines.push(line),
    });
    const post = (path: string, body: object) =>
      request(server, path, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      });
    const bodies: string[] = [];
    for (const stream of [false, true]) {
      bodies.push(
        await (await post("/v1/chat/completions", { model: "chat", ...user("hi"), stream })).text(),
      );
      bodies.push(await (await post("/v1/responses", { model: "responses", input: "hi", stream })).text());
    }
    const said =
      "The agent's model API could not be reached (connection error); the server's log has the details.";
    for (const body of bodies) {
      expect(body).toContain(said);
      expect(body).not.toContain(String(port));
    }
    // The operator's log line keeps what the client was not told.
    expect(lines).toHaveLength(4);
    for (const line of lines) {
      expect(line).toMatch(
        / model_error \(Nothing is listening at http:\/\/127\.0\.0\.1:\d+\/v1 \(connection refused\)/,
      );
      expect(line).toContain(upstream);
    }
  });

  it("logs one line per request, once its response is complete: method, path, status, duration, stop reason", async () => {
    const lines: string[] = [];
    const server = createApp({
      agents: { a: answering("Body marker ANSWER-42") },
      log: (line) => lines.push(line),
    });
    await (await chat(server, {}, { ...user("QUESTION-MARKER"), stream: true })).text();
    await chat(server, {}, { model: "nope", ...user("hi") });
    await request(server, "/v1/models?api-key=QUERY-SECRET");
    expect(lines).toEqual([
      expect.stringMatching(/^POST \/v1\/chat\/completions 200 \d+ms final_answer$/),
      expect.stringMatching(/^POST \/v1\/chat\/completions 404 \d+ms$/),
      expect.stringMatching(/^GET \/v1\/models 200 \d+ms$/),
    ]);
  });
});
