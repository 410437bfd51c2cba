import { describe, expect, it } from "vitest";
import { Agent, type AgentOptions } from "../src/index.js";
import { type AgentServer, createApp } from "../src/server/index.js";
import { type ScriptedStep, scriptedModel } from "../src/testing/index.js";
import { builtinTools } from "../src/tools/builtin/index.js";
import { listen } from "./support/listen.js";

const calculatorAgent = (steps: ScriptedStep[] | (() => ScriptedStep), options: Partial<AgentOptions> = {}) =>
  new Agent({ model: scriptedModel(steps), tools: builtinTools(), ...options });
const user = (content: string) => ({ messages: [{ role: "user" as const, content }] });

interface ErrorBody {
  error: { message: string; type: string; code: string | null; param: string | null };
}
const post = (server: AgentServer, body: unknown, headers: Record<string, string> = {}) =>
  server.app.request("/v1/chat/completions", {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
const errorOf = async (res: Response) => ((await res.json()) as ErrorBody).error;

describe("OpenAI-compatible server: requests, limits and auth", () => {
  it("validates before looking up the model (400 before 404), in OpenAI's error shape", async () => {
    const server = createApp({ agents: { a: calculatorAgent([]) } });
    const cases: [unknown, Record<string, string>, number, string][] = [
      [{ model: "nope", messages: "not a list" }, {}, 400, "invalid_request"],
      ["{oops", {}, 400, "invalid_json"],
      [{ model: "nope", ...user("hi") }, { "content-type": "text/plain" }, 415, "invalid_content_type"],
      [{ model: "nope", ...user("hi"), n: 2 }, {}, 400, "invalid_request"],
      [{ model: "nope", messages: [{ role: "assistant", content: "hi" }] }, {}, 400, "invalid_request"],
      [
        {
          model: "nope",
          messages: [{ role: "tool", tool_call_id: "x", content: "1" }, ...user("hi").messages],
        },
        {},
        400,
        "invalid_request",
      ],
      [{ model: "nope", ...user("hi") }, {}, 404, "model_not_found"],
    ];
    for (const [body, headers, status, code] of cases) {
      const res = await post(server, body, headers);
      expect(res.status, JSON.stringify(body)).toBe(status);
      expect(Object.keys((await res.clone().json()) as object)).toEqual(["error"]);
      expect(await errorOf(res)).toMatchObject({
        code,
        type: status === 404 ? "not_found_error" : "invalid_request_error",
      });
    }
    const notList = await errorOf(await post(server, { messages: "not a list" }));
    expect(notList.param).toBe("messages");
    const dangling = await post(server, {
      messages: [
        { role: "user", content: "hi" },
        {
          role: "assistant",
          content: null,
          tool_calls: [{ id: "t1", type: "function", function: { name: "calculator", arguments: "{}" } }],
        },
        { role: "user", content: "and?" },
      ],
    });
    expect((await errorOf(dangling)).message).toContain("'t1' have no tool message");
  });

  it("maps the conversation to the runtime's history, tool calls and results kept", async () => {
    const model = scriptedModel([{ text: "ok" }]);
    const server = createApp({ agents: { a: new Agent({ model, tools: builtinTools() }) } });
    const res = await post(server, {
      messages: [
        { role: "developer", content: "Be terse." },
        { role: "user", content: [{ type: "text", text: "1+1?" }] },
        {
          role: "assistant",
          content: null,
          tool_calls: [
            {
              id: "t1",
              type: "function",
              function: { name: "calculator", arguments: '{"expression":"1+1"}' },
            },
          ],
        },
        { role: "tool", tool_call_id: "t1", content: "2" },
        { role: "assistant", content: "2" },
        { role: "user", content: "times 3?" },
      ],
    });
    expect(res.status).toBe(200);
    expect(model.requests[0]?.system).toContain("Be terse.");
    expect(model.requests[0]?.messages).toEqual([
      { role: "user", content: "1+1?" },
      {
        role: "assistant",
        content: "",
        toolCalls: [{ id: "t1", name: "calculator", arguments: '{"expression":"1+1"}' }],
      },
      { role: "tool", toolCallId: "t1", name: "calculator", content: "2", isError: false },
      { role: "assistant", content: "2" },
      { role: "user", content: "times 3?" },
    ]);
  });

  it("limits the body size (413), with or without Content-Length", async () => {
    const { baseURL, server } = await listen({ agents: { a: calculatorAgent([]) }, maxBodyBytes: 1000 });
    const big = JSON.stringify(user("x".repeat(5000)));
    const huge = await post(server, big);
    expect(huge.status).toBe(413);
    expect(await errorOf(huge)).toMatchObject({ code: "request_too_large", type: "invalid_request_error" });
    // A chunked upload (no Content-Length) is counted as it arrives.
    const chunked = await fetch(`${baseURL}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: new Blob([big]).stream(),
      duplex: "half",
    } as RequestInit);
    expect(chunked.status).toBe(413);
  });

  it("requires the API key on /v1 when one is set, and never echoes it", async () => {
    const server = createApp({
      agents: { a: calculatorAgent(() => ({ text: "hi" })) },
      apiKey: "s3cret-key",
    });
    for (const authorization of [
      undefined,
      "Bearer nope",
      "Bearer s3cret-ke",
      "s3cret-key",
      "Basic s3cret-key",
    ]) {
      const res = await server.app.request("/v1/models", { headers: authorization ? { authorization } : {} });
      expect(res.status, authorization).toBe(401);
      const text = await res.text();
      expect(JSON.parse(text).error).toMatchObject({ type: "authentication_error", code: "invalid_api_key" });
      expect(text).not.toContain("s3cret");
    }
    expect((await post(server, user("hi"))).status).toBe(401);
    expect((await post(server, user("hi"), { authorization: "Bearer s3cret-key" })).status).toBe(200);
    const lower = await server.app.request("/v1/models", { headers: { authorization: "bearer s3cret-key" } });
    expect(lower.status).toBe(200);
    // The page and health need no key; the page's own API calls and the metrics do.
    for (const path of ["/", "/healthz"]) expect((await server.app.request(path)).status).toBe(200);
    expect((await server.app.request("/metrics")).status).toBe(401);
    expect(await (await server.app.request("/healthz")).json()).toEqual({ status: "ok" });
    expect((await server.app.request("/nope")).status).toBe(404);
  });

  it("refuses other host names when allowedHosts is set (DNS rebinding)", async () => {
    const server = createApp({
      agents: { a: calculatorAgent([]) },
      allowedHosts: ["127.0.0.1", "localhost"],
    });
    expect((await server.app.request("http://localhost:8787/healthz")).status).toBe(200);
    expect((await server.app.request("http://127.0.0.1:8787/v1/models")).status).toBe(200);
    const evil = await server.app.request("http://evil.example:8787/v1/models");
    expect(evil.status).toBe(403);
    expect((await errorOf(evil)).type).toBe("permission_error");
  });
});
