/**
 * OpenAI-compatible server quirks over real HTTP against the fake server: Azure OpenAI and AI DIAL
 * request shaping, the `developer` role, `parallel_tool_calls`, and Ollama, vLLM and llama.cpp
 * server streams. There are no recordings of vLLM or llama.cpp streams: those chunks are built from
 * the servers' documented wire shapes.
 */
import OpenAI from "openai";
import { afterEach, describe, expect, it, vi } from "vitest";
import { z } from "zod";
import { fakeServerPerTest } from "../../test/support/model-harness.js";
import { Agent } from "../agent/agent.js";
import type { AgentEvent } from "../core/events.js";
import { type FakeOpenAIServer, startFakeOpenAIServer } from "../testing/fake-openai-server.js";
import { defineTool } from "../tools/tool.js";
import type { ModelEvent, ModelRequest } from "./adapter.js";
import { type OpenAIChatModelOptions, openAIChatModel } from "./openai-chat.js";

const KEY = "azure-key-SECRET-7f3a9c";
const request: ModelRequest = { system: "Be brief.", messages: [{ role: "user", content: "hi" }], tools: [] };
const withTool: ModelRequest = {
  ...request,
  tools: [{ name: "ls", description: "List files", parameters: { type: "object", properties: {} } }],
};
const serve = fakeServerPerTest(startFakeOpenAIServer);

afterEach(() => {
  vi.unstubAllEnvs();
});

async function last(options: OpenAIChatModelOptions, req: ModelRequest = request): Promise<ModelEvent> {
  const events: ModelEvent[] = [];
  for await (const e of openAIChatModel({ maxRetries: 0, ...options }).stream(req, {})) events.push(e);
  return events.at(-1) as ModelEvent;
}

/** An SSE body of these chunks, then `data: [DONE]`. */
const sse = (chunks: object[]) =>
  `${chunks.map((c) => `data: ${JSON.stringify(c)}\n\n`).join("")}data: [DONE]\n\n`;

describe("Azure OpenAI and AI DIAL", () => {
  it("posts to /openai/deployments/<model>/chat/completions?api-version with an api-key header", async () => {
    const s = await serve(() => ({ text: "ok" }));
    const azure = { apiVersion: "2024-10-21" };
    expect(await last({ model: "gpt-4o", apiKey: KEY, baseURL: s.origin, azure })).toMatchObject({
      type: "done",
    });
    // AI DIAL style: a base URL that already ends in /openai, and a deployment other than the model id.
    const dial = { apiVersion: "2024-02-01", deployment: "gpt-4o-prod" };
    await last({ model: "o3-mini", apiKey: KEY, baseURL: `${s.origin}/openai/`, azure: dial });
    await last({ model: "gpt-4o", apiKey: KEY, baseURL: `${s.origin}/`, azure: dial });
    expect(s.requests.map((r) => [r.path, r.query])).toEqual([
      ["/openai/deployments/gpt-4o/chat/completions", { "api-version": "2024-10-21" }],
      ["/openai/deployments/gpt-4o-prod/chat/completions", { "api-version": "2024-02-01" }],
      ["/openai/deployments/gpt-4o-prod/chat/completions", { "api-version": "2024-02-01" }],
    ]);
    for (const r of s.requests) {
      expect(r.headers["api-key"]).toBe(KEY);
      expect(r.headers.authorization).toBeUndefined();
    }
    // Not api.openai.com: a reasoning model keeps the plain system role.
    expect(s.requests[1]?.body.messages[0]).toEqual({ role: "system", content: "Be brief." });
  });

  it("never shows the api-key echoed in an error, and names the Azure variables when no key is set", async () => {
    const s = await serve(() => ({ status: 401, body: `{"error":{"message":"Access denied: key ${KEY}"}}` }));
    const error = await last({
      model: "m",
      apiKey: KEY,
      baseURL: s.origin,
      azure: { apiVersion: "2024-10-21" },
    });
    expect(error).toMatchObject({ type: "error", error: { code: "http_401" } });
    expect(JSON.stringify(error)).not.toContain("SECRET");
    vi.stubEnv("AZURE_OPENAI_API_KEY", "");
    vi.stubEnv("OPENAI_API_KEY", "");
    const missing = await last({ model: "m", baseURL: s.origin, azure: { apiVersion: "2024-10-21" } });
    expect(missing).toMatchObject({ type: "error", error: { code: "missing_api_key" } });
    expect(missing.type === "error" && missing.error.message).toContain("AZURE_OPENAI_API_KEY");
  });
});

describe("the system role and parallel_tool_calls", () => {
  /** A client whose base URL is api.openai.com, its requests delivered to the fake server. */
  const openaiClient = (s: FakeOpenAIServer) =>
    new OpenAI({
      apiKey: KEY,
      baseURL: "https://api.openai.com/v1",
      maxRetries: 0,
      logLevel: "off",
      fetch: (url, init) => fetch(String(url).replace("https://api.openai.com/v1", s.url), init),
    });

  it('defaults to "developer" for OpenAI reasoning models on api.openai.com, else "system"', async () => {
    const s = await serve(() => ({ text: "ok" }));
    const client = openaiClient(s);
    for (const model of ["o3-mini", "gpt-5-mini", "o1", "gpt-4o-mini"]) await last({ model, client });
    await last({ model: "o3-mini", apiKey: KEY, baseURL: s.url });
    await last({ model: "gpt-4o", apiKey: KEY, baseURL: s.url, systemRole: "developer" });
    await last({ model: "o4-mini", client, systemRole: "system" });
    expect(s.requests.map((r) => r.body.messages[0].role)).toEqual([
      "developer",
      "developer",
      "developer",
      "system",
      "system",
      "developer",
      "system",
    ]);
    expect(s.requests[0]?.headers.authorization).toBe(`Bearer ${KEY}`);
  });

  it("sends parallel_tool_calls only when tools are present and the option is set", async () => {
    const s = await serve(() => ({ text: "ok" }));
    const base = { model: "m", apiKey: KEY, baseURL: s.url };
    await last({ ...base, parallelToolCalls: false }, withTool);
    await last({ ...base, parallelToolCalls: true }, withTool);
    await last({ ...base, parallelToolCalls: true }, request);
    await last(base, withTool);
    expect(s.requests.map((r) => r.body.parallel_tool_calls)).toEqual([false, true, undefined, undefined]);
  });
});

describe("Ollama, vLLM and llama.cpp server streams", () => {
  it("Ollama /v1: a whole call in one chunk, object arguments, no index and no id", async () => {
    // The recorded native /api/chat stream's messages, carried in /v1 chunks.
    const chunk = (delta: object, finish: string | null = null) => ({
      id: "chatcmpl-273",
      object: "chat.completion.chunk",
      model: "llama3.2",
      system_fingerprint: "fp_ollama",
      choices: [{ index: 0, delta, finish_reason: finish }],
    });
    const s = await serve(() => ({
      raw: sse([
        chunk({
          role: "assistant",
          content: "",
          tool_calls: [{ function: { name: "get_weather", arguments: { city: "Tokyo" } } }],
        }),
        chunk({ role: "assistant", content: "" }, "stop"),
      ]),
    }));
    const done = await last({ model: "llama3.2", baseURL: s.url }, withTool);
    expect(done.type === "done" && done.message.toolCalls).toEqual([
      { id: "call_0", name: "get_weather", arguments: '{"city":"Tokyo"}' },
    ]);
  });

  it("vLLM's one-delta tool call, then llama.cpp's reasoning_content as thinking events, through an Agent", async () => {
    const vllm = (delta: object, finish: string | null = null) => ({
      id: "chatcmpl-9f2c",
      object: "chat.completion.chunk",
      model: "Qwen/Qwen2.5-7B-Instruct",
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
    });
    const llama = (delta: object, finish: string | null = null, extra: object = {}) => ({
      choices: [{ finish_reason: finish, index: 0, delta }],
      id: "chatcmpl-X6ur",
      model: "gpt-oss:20b",
      system_fingerprint: "b6097-9515c613",
      object: "chat.completion.chunk",
      ...extra,
    });
    const s = await serve([
      {
        raw: sse([
          vllm({ role: "assistant", content: null }),
          vllm({
            tool_calls: [
              {
                id: "chatcmpl-tool-5d1e",
                type: "function",
                index: 0,
                function: { name: "add", arguments: '{"a": 2, "b": 3}' },
              },
            ],
          }),
          vllm({ content: "" }, "tool_calls"),
          {
            ...vllm({}),
            choices: [],
            usage: { prompt_tokens: 90, completion_tokens: 20, total_tokens: 110 },
          },
        ]),
      },
      {
        raw: sse([
          llama({ role: "assistant", content: null }),
          llama({ reasoning_content: "The tool said 5." }),
          llama({ content: "2 + 3 = 5" }),
          llama({}, "stop", {
            usage: { completion_tokens: 9, prompt_tokens: 120, total_tokens: 129 },
            timings: { prompt_n: 120, prompt_ms: 20.1, predicted_n: 9, predicted_ms: 33.6 },
          }),
        ]),
      },
    ]);
    const add = defineTool({
      name: "add",
      description: "Adds two numbers.",
      parameters: z.object({ a: z.number(), b: z.number() }),
      execute: ({ a, b }) => a + b,
    });
    const events: AgentEvent[] = [];
    const agent = new Agent({
      model: openAIChatModel({ model: "local", baseURL: s.url, maxRetries: 0 }),
      tools: [add],
      onEvent: (e) => events.push(e),
    });
    const result = await agent.run("What is 2 + 3?");
    expect(result).toMatchObject({ stopReason: "final_answer", output: "2 + 3 = 5" });
    expect(events.filter((e) => e.type === "tool_call")).toMatchObject([
      { id: "chatcmpl-tool-5d1e", name: "add", arguments: { a: 2, b: 3 } },
    ]);
    expect(events.filter((e) => e.type === "thinking")).toMatchObject([
      { type: "thinking", text: "The tool said 5." },
    ]);
    expect(s.requests[1]?.body.messages.at(-1)).toEqual({
      role: "tool",
      tool_call_id: "chatcmpl-tool-5d1e",
      content: "5",
    });
    expect(result.usage).toMatchObject({ inputTokens: 210, outputTokens: 29 });
  });
});
