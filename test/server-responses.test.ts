/**
 * `POST /v1/responses`: the agent as an OpenAI Responses API model, driven by the official
 * `openai` client (`responses.create`, streaming and not, and `responses.stream`) against a real
 * HTTP server; conversations continued by `previous_response_id` with a store; the same auth,
 * limits and error shapes as chat completions; and one end-to-end run of `agentloop serve`.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { Agent, defineTool } from "../src/index.js";
import { memoryStore } from "../src/store/index.js";
import { startFakeOpenAIServer } from "../src/testing/fake-openai-server.js";
import { scriptedModel } from "../src/testing/index.js";
import { builtinTools } from "../src/tools/builtin/index.js";
import { type Event, errorOf, post } from "./support/http.js";
import { listen } from "./support/listen.js";
import { startServe } from "./support/serve-process.js";

type StreamEvent = { type: string; sequence_number: number; agentloop?: Event; [field: string]: unknown };

/** An agent whose model calls the calculator once, then answers with its result. */
function calculatorAgent(options: { thinking?: string } = {}) {
  const model = scriptedModel([
    {
      text: "Let me compute.",
      ...(options.thinking && { thinking: options.thinking }),
      toolCalls: [{ id: "call_1", name: "calculator", arguments: { expression: "6*7" } }],
    },
    { text: "It is 42." },
  ]);
  return { model, agent: new Agent({ model, tools: builtinTools() }) };
}

async function events(stream: AsyncIterable<unknown>): Promise<StreamEvent[]> {
  const out: StreamEvent[] = [];
  for await (const event of stream) out.push(event as StreamEvent);
  return out;
}

describe("POST /v1/responses with the official client", () => {
  it("answers responses.create with a response object: output text, usage, the turn_complete event", async () => {
    const { agent } = calculatorAgent();
    const { client } = await listen({ agents: { calc: agent } });
    const response = await client.responses.create({
      model: "calc",
      input: "6*7?",
      instructions: "Be exact.",
    });
    expect(response).toMatchObject({ object: "response", status: "completed", model: "calc", error: null });
    expect(response.id).toMatch(/^resp_[0-9a-f]{32}$/);
    expect(response.output_text).toBe("Let me compute.\n\nIt is 42.");
    expect(response.output.map((item) => item.type)).toEqual(["message", "message"]);
    expect(response.usage).toMatchObject({
      input_tokens: expect.any(Number),
      output_tokens: expect.any(Number),
    });
    expect((response as unknown as { agentloop: Event }).agentloop).toMatchObject({
      type: "turn_complete",
      stopReason: "final_answer",
      output: "It is 42.",
      runId: response.id,
    });
  });

  it("streams response.* events: text deltas, tool activity in keepalive events, response.completed last", async () => {
    const { agent } = calculatorAgent({ thinking: "Multiply." });
    const { client } = await listen({ agents: { calc: agent } });
    const stream = await client.responses.create({ model: "calc", input: "6*7?", stream: true });
    const all = await events(stream);
    expect(all[0]?.type).toBe("response.created");
    expect(all.at(-1)?.type).toBe("response.completed");
    expect(all.map((e) => e.sequence_number)).toEqual(all.map((_, i) => i));
    const text = all.filter((e) => e.type === "response.output_text.delta").map((e) => e.delta);
    expect(text.join("")).toBe("Let me compute.\n\nIt is 42.");
    const thinking = all.filter((e) => e.type === "response.reasoning_text.delta").map((e) => e.delta);
    expect(thinking.join("")).toBe("Multiply.");
    const activity = all.filter((e) => e.type === "keepalive").map((e) => e.agentloop);
    expect(activity).toMatchObject([
      { type: "tool_call", id: "call_1", name: "calculator", arguments: { expression: "6*7" } },
      { type: "tool_result", id: "call_1", name: "calculator", content: "42", isError: false },
    ]);
    const last = all.at(-1) as StreamEvent & { response: OpenAI.Responses.Response };
    expect(last.agentloop).toMatchObject({ type: "turn_complete", stopReason: "final_answer" });
    expect(last.response.output.map((item) => item.type)).toEqual(["reasoning", "message", "message"]);
  });

  it("works with responses.stream: the helper accumulates the same response", async () => {
    const { agent } = calculatorAgent({ thinking: "Multiply." });
    const { client } = await listen({ agents: { calc: agent } });
    const stream = client.responses.stream({ model: "calc", input: "6*7?" });
    const deltas: string[] = [];
    stream.on("response.output_text.delta", (event) => deltas.push(event.delta));
    const final = await stream.finalResponse();
    expect(deltas.join("")).toBe("Let me compute.\n\nIt is 42.");
    expect(final.status).toBe("completed");
    expect(final.output_text).toBe("Let me compute.\n\nIt is 42.");
    const reasoning = final.output[0] as OpenAI.Responses.ResponseReasoningItem;
    expect(reasoning.content).toEqual([{ type: "reasoning_text", text: "Multiply." }]);
  });

  it("maps input items: instructions and system messages, earlier function calls and their outputs", async () => {
    const model = scriptedModel([{ text: "ok" }]);
    const { client } = await listen({ agents: { a: new Agent({ model, instructions: "Agent rules." }) } });
    await client.responses.create({
      model: "a",
      instructions: "Extra rule.",
      input: [
        { role: "system", content: "System rule." },
        { role: "user", content: [{ type: "input_text", text: "weather?" }] },
        { type: "reasoning", id: "rs_1", summary: [] },
        { type: "function_call", call_id: "c1", name: "get_weather", arguments: '{"city":"Oslo"}' },
        { type: "function_call_output", call_id: "c1", output: "sunny" },
        { role: "assistant", content: "It is sunny." },
        { role: "user", content: "thanks" },
      ],
    });
    const request = model.requests[0];
    expect(request?.system).toContain("Agent rules.\n\nExtra rule.\n\nSystem rule.");
    expect(request?.messages).toEqual([
      { role: "user", content: "weather?" },
      {
        role: "assistant",
        content: "",
        toolCalls: [{ id: "c1", name: "get_weather", arguments: '{"city":"Oslo"}' }],
      },
      { role: "tool", toolCallId: "c1", name: "get_weather", content: "sunny", isError: false },
      { role: "assistant", content: "It is sunny." },
      { role: "user", content: "thanks" },
    ]);
  });

  it("ends a run cut by its iteration limit with response.incomplete", async () => {
    const model = scriptedModel(() => ({
      toolCalls: [{ name: "calculator", arguments: { expression: "1+1" } }],
    }));
    const { client } = await listen({
      agents: { a: new Agent({ model, tools: builtinTools(), maxIterations: 1 }) },
    });
    const all = await events(await client.responses.create({ model: "a", input: "loop", stream: true }));
    const last = all.at(-1) as StreamEvent & { response: OpenAI.Responses.Response };
    expect(last.type).toBe("response.incomplete");
    expect(last.response).toMatchObject({
      status: "incomplete",
      incomplete_details: { reason: "max_output_tokens" },
    });
    expect(last.agentloop).toMatchObject({ type: "turn_complete", stopReason: "max_iterations" });
  });

  it("ends with response.failed when the model fails after the stream began, and 502 when nothing was sent", async () => {
    const model = scriptedModel([
      { text: "Starting.", toolCalls: [{ name: "calculator", arguments: { expression: "2+2" } }] },
      { error: { code: "http_500", message: "Model API error (HTTP 500): upstream down" } },
      { error: { code: "http_500", message: "Model API error (HTTP 500): upstream down" } },
    ]);
    const agent = new Agent({ model, tools: builtinTools() });
    const { client, baseURL } = await listen({ agents: { a: agent }, streamHoldMs: 1000 });
    const all = await events(await client.responses.create({ model: "a", input: "go", stream: true }));
    const last = all.at(-1) as StreamEvent & { response: OpenAI.Responses.Response };
    expect(last.type).toBe("response.failed");
    expect(last.response.error).toEqual({
      code: "http_500",
      message: "Model API error (HTTP 500): upstream down",
    });
    expect(last.agentloop).toMatchObject({ type: "error", code: "http_500" });
    expect(all.at(-2)?.agentloop).toMatchObject({ type: "turn_complete", stopReason: "model_error" });
    const res = await post(`${baseURL}/responses`, { model: "a", input: "again", stream: true });
    expect(res.status).toBe(502);
    expect(await errorOf(res)).toMatchObject({ code: "model_error", type: "upstream_error" });
  });
});

describe("POST /v1/responses: previous_response_id", () => {
  it("continues a stored response, and forks from an earlier one", async () => {
    const store = memoryStore();
    const model = scriptedModel((request) => ({ text: `seen ${request.messages.length}` }));
    const { client } = await listen({ agents: { a: new Agent({ model }) }, store });
    const first = await client.responses.create({ model: "a", input: "one" });
    expect(first.output_text).toBe("seen 1");
    expect((first as { store?: boolean }).store).toBe(true);
    const second = await client.responses.create({
      model: "a",
      input: "two",
      previous_response_id: first.id,
    });
    expect(second.output_text).toBe("seen 3");
    expect(second.previous_response_id).toBe(first.id);
    const third = await client.responses.create({
      model: "a",
      input: "three",
      previous_response_id: second.id,
    });
    expect(third.output_text).toBe("seen 5");
    // Another turn after the first one, as the Responses API allows.
    const fork = await client.responses.create({
      model: "a",
      input: "other",
      previous_response_id: first.id,
    });
    expect(fork.output_text).toBe("seen 3");
    expect(model.requests[3]?.messages.map((m) => m.content)).toEqual(["one", "seen 1", "other"]);
    // store: false runs are not stored, so they cannot be continued.
    const unstored = await client.responses.create({ model: "a", input: "x", store: false });
    expect((unstored as { store?: boolean }).store).toBe(false);
    const missing = client.responses.create({ model: "a", input: "y", previous_response_id: unstored.id });
    await expect(missing).rejects.toMatchObject({
      status: 404,
      code: "previous_response_not_found",
      param: "previous_response_id",
    });
  });

  it("names the calls a run waits for, which /v1/runs/{id}/approvals continues", async () => {
    const store = memoryStore();
    const remove = defineTool({
      name: "remove",
      description: "Removes a file.",
      parameters: z.object({ path: z.string() }),
      needsApproval: true,
      execute: async ({ path }) => `removed ${path}`,
    });
    const model = scriptedModel([
      { toolCalls: [{ id: "call_r", name: "remove", arguments: { path: "a.txt" } }] },
      { text: "Removed." },
    ]);
    const { client, baseURL } = await listen({ agents: { a: new Agent({ model, tools: [remove] }) }, store });
    const paused = await client.responses.create({ model: "a", input: "clean up" });
    expect(paused.output_text).toBe('Waiting for approval: remove({"path":"a.txt"}) [call_r]');
    expect((paused as unknown as { agentloop: Event }).agentloop).toMatchObject({
      stopReason: "approval_required",
      pendingApprovals: [{ id: "call_r", name: "remove", arguments: { path: "a.txt" } }],
    });
    const res = await post(`${baseURL}/runs/${paused.id}/approvals`, { approve: "all" });
    expect(res.status).toBe(200);
    expect(
      ((await res.json()) as { choices: { message: { content: string } }[] }).choices[0]?.message.content,
    ).toBe("Removed.");
  });

  it("needs a store (501 saying how to configure one)", async () => {
    const { baseURL } = await listen({ agents: { a: new Agent({ model: scriptedModel([]) }) } });
    const res = await post(`${baseURL}/responses`, { input: "hi", previous_response_id: "resp_1" });
    expect(res.status).toBe(501);
    expect((await errorOf(res)).message).toMatch(
      /^previous_response_id needs stored runs, and this server has no store: start agentloop serve without --no-store \(it stores in AGENTLOOP_DB/,
    );
  });
});

describe("POST /v1/responses: auth, limits and errors as for chat completions", () => {
  it("answers bad requests with one OpenAI-style error naming the field", async () => {
    const { baseURL } = await listen({
      agents: { a: new Agent({ model: scriptedModel([]) }) },
      maxBodyBytes: 2000,
    });
    const cases: [unknown, number, string, string | null][] = [
      ["{not json", 400, "The request body is not valid JSON.", null],
      [{ model: "a" }, 400, "input: Invalid input", "input"],
      [
        { input: [{ role: "assistant", content: "hi" }] },
        400,
        "input: the last item must be a user message (the input of the run).",
        "input",
      ],
      [
        {
          input: [
            { type: "function_call", call_id: "c", name: "f", arguments: "{}" },
            { role: "user", content: "hi" },
          ],
        },
        400,
        "input.1: the function calls 'c' have no function_call_output before it.",
        "input.1",
      ],
      [
        { input: [{ type: "item_reference", id: "x" }] },
        400,
        "input.0: items of type 'item_reference' are not supported here: send messages, function_call and function_call_output items.",
        "input.0.type",
      ],
      [
        { model: "nope", input: "hi" },
        404,
        "The model 'nope' does not exist: GET /v1/models lists the served agents.",
        "model",
      ],
      [{ input: "x".repeat(3000) }, 413, "Request body too large.", null],
    ];
    for (const [body, status, message, param] of cases) {
      const res = await post(`${baseURL}/responses`, body);
      expect(res.status, message).toBe(status);
      const error = await errorOf(res);
      if (status === 400 && param === "input") expect(error.message.startsWith("input:")).toBe(true);
      else expect(error.message).toBe(message);
      expect(error.param).toBe(param);
    }
  });

  it("requires the API key when one is set", async () => {
    const model = scriptedModel([{ text: "hi" }]);
    const { baseURL, port } = await listen({ agents: { a: new Agent({ model }) }, apiKey: "local-key" });
    const res = await post(`${baseURL}/responses`, { input: "hi" });
    expect(res.status).toBe(401);
    expect(await errorOf(res)).toMatchObject({ code: "invalid_api_key", type: "authentication_error" });
    const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: "local-key", maxRetries: 0 });
    expect((await client.responses.create({ input: "hi" })).output_text).toBe("hi");
  });
});

describe("agentloop serve: /v1/responses end to end", () => {
  it("serves responses.stream to the official client, with runs stored for previous_response_id", async () => {
    const upstream = await startFakeOpenAIServer({
      respond: [
        { toolCalls: [{ name: "calculator", arguments: { expression: "157.09 * 493.89" } }] },
        { text: "It is 77585.1801." },
        { text: "You asked about 157.09 * 493.89." },
      ],
    });
    try {
      const serve = startServe({
        OPENAI_BASE_URL: upstream.url,
        OPENAI_API_KEY: "sk-upstream",
        AGENTLOOP_API_KEY: "local-key",
        AGENTLOOP_DB: join(mkdtempSync(join(tmpdir(), "agentloop-")), "runs.db"),
      });
      const client = new OpenAI({ baseURL: `${await serve.url()}/v1`, apiKey: "local-key", maxRetries: 0 });
      const stream = client.responses.stream({ model: "gpt-4o-mini", input: "157.09 * 493.89?" });
      const tools: string[] = [];
      for await (const event of stream) {
        const extra = (event as { agentloop?: Event }).agentloop;
        if (extra?.type === "tool_result") tools.push(String(extra.content));
      }
      const first = await stream.finalResponse();
      expect(first.output_text).toBe("It is 77585.1801.");
      expect(tools).toEqual(["77585.1801"]);
      const next = await client.responses.create({
        input: "What did I ask?",
        previous_response_id: first.id,
      });
      expect(next.output_text).toBe("You asked about 157.09 * 493.89.");
      const messages = upstream.requests[2]?.body.messages.map((m: { role: string }) => m.role);
      expect(messages).toEqual(["user", "assistant", "tool", "assistant", "user"]);
      expect(serve.stderr()).toMatch(/POST \/v1\/responses 200 \d+ms final_answer/);
      expect(serve.stderr()).toMatch(
        /^agentloop: serving gpt-4o-mini on http:\/\/127\.0\.0\.1:\d+ \(OpenAI-compatible: \/v1\/chat\/completions, \/v1\/responses\)$/m,
      );
    } finally {
      await upstream.close();
    }
  });
});
