import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import OpenAI from "openai";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { Agent, defineTool } from "../src/index.js";
import { createApp, type ServerOptions } from "../src/server/index.js";
import { type ScriptedStep, scriptedModel } from "../src/testing/index.js";
import { builtinTools } from "../src/tools/builtin/index.js";

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});

/** Serves the app on a random loopback port; returns an official OpenAI client for it. */
async function listen(options: ServerOptions, apiKey = "none") {
  const server = createApp(options);
  const http = await new Promise<ReturnType<typeof serve>>((resolve) => {
    const s = serve({ fetch: server.app.fetch, port: 0, hostname: "127.0.0.1" }, () => resolve(s));
  });
  closers.push(() => new Promise((resolve) => http.close(() => resolve())));
  const { port } = http.address() as AddressInfo;
  const baseURL = `http://127.0.0.1:${port}/v1`;
  return { server, baseURL, client: new OpenAI({ baseURL, apiKey, maxRetries: 0 }) };
}

const calculatorAgent = (steps: ScriptedStep[]) =>
  new Agent({ model: scriptedModel(steps), tools: builtinTools(), instructions: "You are exact." });

/** The parts of a response body these tests read. */
interface Body {
  error: { message: string; type: string; code: string | null };
  data: { id: string }[];
  model: string;
  choices: { message: { content: string } }[];
}
const body = async (res: Response) => (await res.json()) as Body;

const post = (server: ReturnType<typeof createApp>, body: unknown, headers: Record<string, string> = {}) =>
  server.app.request("/v1/chat/completions", {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });

describe("OpenAI-compatible server", () => {
  it("answers the official client without streaming", async () => {
    const model = scriptedModel([
      {
        toolCalls: [{ name: "calculator", arguments: { expression: "157.09 * 493.89" } }],
        usage: { inputTokens: 10, outputTokens: 5 },
      },
      { text: "77585.1801", usage: { inputTokens: 20, outputTokens: 3 } },
    ]);
    const agent = new Agent({ model, tools: builtinTools(), instructions: "You are exact." });
    const { client } = await listen({ agents: { calc: agent } });
    const completion = await client.chat.completions.create({
      model: "calc",
      messages: [
        { role: "system", content: "Answer with digits only." },
        { role: "user", content: "157.09 * 493.89?" },
      ],
    });
    expect(completion.object).toBe("chat.completion");
    expect(completion.choices[0]?.message.content).toBe("77585.1801");
    expect(completion.choices[0]?.finish_reason).toBe("stop");
    expect(completion.usage).toMatchObject({ prompt_tokens: 30, completion_tokens: 8, total_tokens: 38 });
    // The client's system message goes after the agent's own instructions.
    expect(model.requests[0]?.system).toBe("You are exact.\n\nAnswer with digits only.");
  });

  it("streams content deltas, tool events in `agentloop`, a usage chunk and [DONE]", async () => {
    const agent = calculatorAgent([
      {
        text: "Let me compute.",
        toolCalls: [{ id: "c1", name: "calculator", arguments: { expression: "6*7" } }],
      },
      { text: "The answer is 42." },
    ]);
    const { client } = await listen({ agents: { calc: agent } });
    const stream = await client.chat.completions.create({
      model: "calc",
      messages: [{ role: "user", content: "6*7?" }],
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks: (OpenAI.Chat.Completions.ChatCompletionChunk & { agentloop?: { type: string } })[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    const content = chunks.map((c) => c.choices[0]?.delta.content ?? "").join("");
    expect(content).toBe("Let me compute.\n\nThe answer is 42.");
    const events = chunks.flatMap((c) => (c.agentloop ? [c.agentloop] : []));
    expect(events.map((e) => e.type)).toEqual(["tool_call", "tool_result", "turn_complete"]);
    expect(events[1]).toMatchObject({ type: "tool_result", id: "c1", content: "42", isError: false });
    const finish = chunks.find((c) => c.choices[0]?.finish_reason);
    expect(finish?.choices[0]?.finish_reason).toBe("stop");
    expect(finish?.agentloop).toMatchObject({
      type: "turn_complete",
      stopReason: "final_answer",
      iterations: 2,
    });
    expect(chunks.at(-1)?.choices).toEqual([]);
    expect(chunks.at(-1)?.usage).toBeDefined();
  });

  it("maps stop reasons to finish_reason and errors to 502", async () => {
    const loopForever = () => ({
      toolCalls: [{ name: "calculator", arguments: { expression: `${Math.random()}` } }],
    });
    const agents = {
      ask: new Agent({
        model: scriptedModel([
          { toolCalls: [{ name: "ask_question", arguments: { question: "Which city?" } }] },
        ]),
        mode: "explicit",
      }),
      limit: new Agent({ model: scriptedModel(loopForever), tools: builtinTools(), maxIterations: 2 }),
      broken: new Agent({
        model: scriptedModel(() => ({
          error: { code: "http_500", message: "Model API error (HTTP 500): boom" },
        })),
      }),
      late: new Agent({
        model: scriptedModel([
          { text: "Working on it.", toolCalls: [{ name: "calculator", arguments: { expression: "1+1" } }] },
          { error: { code: "http_500", message: "boom later" } },
        ]),
        tools: builtinTools(),
      }),
    };
    const { client, baseURL } = await listen({ agents });
    const ask = await client.chat.completions.create({
      model: "ask",
      messages: [{ role: "user", content: "trip" }],
    });
    expect(ask.choices[0]).toMatchObject({ finish_reason: "stop", message: { content: "Which city?" } });
    const limit = await client.chat.completions.create({
      model: "limit",
      messages: [{ role: "user", content: "go" }],
    });
    expect(limit.choices[0]?.finish_reason).toBe("length");
    // Nothing streamed yet: a 502 with OpenAI's error shape, streaming or not.
    for (const stream of [false, true]) {
      const res = await fetch(`${baseURL}/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "broken", messages: [{ role: "user", content: "hi" }], stream }),
      });
      expect(res.status).toBe(502);
      expect(await body(res)).toEqual({
        error: {
          message: "Model API error (HTTP 500): boom",
          type: "upstream_error",
          code: "model_error",
          param: null,
        },
      });
    }
    // After something was streamed: a last chunk whose `agentloop` is the error event.
    const stream = await client.chat.completions.create({
      model: "late",
      messages: [{ role: "user", content: "hi" }],
      stream: true,
    });
    const chunks: { agentloop?: { type: string; message?: string } }[] = [];
    for await (const chunk of stream)
      chunks.push(chunk as { agentloop?: { type: string; message?: string } });
    expect(chunks.at(-1)?.agentloop).toMatchObject({ type: "error", message: "boom later" });
  });

  it("validates before looking up the model, and speaks OpenAI's error shape", async () => {
    const server = createApp({ agents: { a: calculatorAgent([]) } });
    const bad = await post(server, { model: "nope", messages: "not a list" });
    expect(bad.status).toBe(400);
    expect((await body(bad)).error).toMatchObject({
      type: "invalid_request_error",
      code: "invalid_request",
    });
    const json = await post(server, "{oops");
    expect(json.status).toBe(400);
    const lastNotUser = await post(server, { messages: [{ role: "assistant", content: "hi" }] });
    expect(lastNotUser.status).toBe(400);
    expect((await body(lastNotUser)).error.message).toContain("the last message must be a user message");
    const missing = await post(server, { model: "nope", messages: [{ role: "user", content: "hi" }] });
    expect(missing.status).toBe(404);
    expect((await body(missing)).error).toMatchObject({ type: "not_found_error", code: "model_not_found" });
    const huge = await post(createApp({ agents: { a: calculatorAgent([]) }, maxBodyBytes: 1000 }), {
      messages: [{ role: "user", content: "x".repeat(5000) }],
    });
    expect(huge.status).toBe(413);
    expect((await body(huge)).error.code).toBe("request_too_large");
  });

  it("requires the API key when one is set, and lists models, health and metrics", async () => {
    const server = createApp({
      agents: { first: calculatorAgent([{ text: "hi" }]), second: calculatorAgent([]) },
      apiKey: "s3cret",
    });
    const none = await server.app.request("/v1/models");
    expect(none.status).toBe(401);
    expect((await body(none)).error.type).toBe("authentication_error");
    const wrong = await server.app.request("/v1/models", { headers: { authorization: "Bearer nope" } });
    expect(wrong.status).toBe(401);
    const models = await server.app.request("/v1/models", { headers: { authorization: "Bearer s3cret" } });
    expect((await body(models)).data.map((m: { id: string }) => m.id)).toEqual(["first", "second"]);
    // A request without `model` goes to the first agent.
    const res = await post(
      server,
      { messages: [{ role: "user", content: "hello" }] },
      { authorization: "Bearer s3cret" },
    );
    expect((await body(res)).model).toBe("first");
    expect(await (await server.app.request("/healthz")).json()).toEqual({ status: "ok" });
    const metrics = await (await server.app.request("/metrics")).text();
    expect(metrics).toContain('agentloop_runs_total{stop_reason="final_answer"} 1');
    expect(metrics).toContain("agentloop_run_iterations_count 1");
    const page = await server.app.request("/");
    expect(await page.text()).toContain("<title>agentloop</title>");
  });

  it("aborts the run and its tool calls when the client disconnects mid-stream", async () => {
    let toolSignal: AbortSignal | undefined;
    let reached: () => void = () => {};
    const started = new Promise<void>((resolve) => {
      reached = resolve;
    });
    const wait = defineTool({
      name: "wait",
      description: "Waits until aborted.",
      parameters: z.object({}),
      execute: (_args, { signal }) =>
        new Promise((_, reject) => {
          toolSignal = signal;
          reached();
          signal.addEventListener("abort", () => reject(new Error("aborted")));
        }),
    });
    const agent = new Agent({
      model: scriptedModel([{ text: "Waiting.", toolCalls: [{ name: "wait" }] }]),
      tools: [wait],
    });
    const { baseURL, server } = await listen({ agents: { w: agent } });
    const controller = new AbortController();
    const res = await fetch(`${baseURL}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ messages: [{ role: "user", content: "wait" }], stream: true }),
      signal: controller.signal,
    });
    expect(res.status).toBe(200);
    await started;
    controller.abort();
    await server.idle();
    expect(toolSignal?.aborted).toBe(true);
    const metrics = server.metrics.render();
    expect(metrics).toContain('agentloop_runs_total{stop_reason="aborted"} 1');
  });

  it("gives 100 concurrent streaming requests each their own answer", async () => {
    const model = scriptedModel((request) => ({ text: `echo: ${request.messages.at(-1)?.content}` }));
    const { client } = await listen({ agents: { echo: new Agent({ model }) } });
    const answers = await Promise.all(
      Array.from({ length: 100 }, async (_, i) => {
        const stream = await client.chat.completions.create({
          model: "echo",
          messages: [{ role: "user", content: `request ${i}` }],
          stream: true,
        });
        let text = "";
        for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? "";
        return text;
      }),
    );
    expect(answers).toEqual(Array.from({ length: 100 }, (_, i) => `echo: request ${i}`));
  });

  it("drains: new requests get 503 while the ones in flight finish", async () => {
    let release: () => void = () => {};
    const gate = new Promise<ScriptedStep>((resolve) => {
      release = () => resolve({ text: "finished" });
    });
    const agent = new Agent({ model: scriptedModel(() => gate) });
    const server = createApp({ agents: { a: agent } });
    const inFlight = post(server, { messages: [{ role: "user", content: "slow" }] });
    await new Promise((resolve) => setImmediate(resolve));
    server.drain();
    const rejected = await post(server, { messages: [{ role: "user", content: "new" }] });
    expect(rejected.status).toBe(503);
    let idle = false;
    void server.idle().then(() => {
      idle = true;
    });
    expect(idle).toBe(false);
    release();
    const res = await inFlight;
    expect((await body(res)).choices[0]?.message.content).toBe("finished");
    await server.idle();
  });
});
