import { context, SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";
import {
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
  TracerProvider,
} from "@opentelemetry/sdk-trace";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { Agent, type AgentEvent, defineTool } from "../index.js";
import { anthropicModel } from "../models/anthropic.js";
import { openAIChatModel } from "../models/openai-chat.js";
import { openAIResponsesModel } from "../models/openai-responses.js";
import { startFakeAnthropicServer } from "../testing/fake-anthropic-server.js";
import { startFakeOpenAIServer } from "../testing/fake-openai-server.js";
import { startFakeResponsesServer } from "../testing/fake-responses-server.js";
import { scriptedModel } from "../testing/index.js";
import { AsyncContextManager } from "./context-manager.js";

const exporter = new InMemorySpanExporter();
const tracerProvider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] });
const manager = new AsyncContextManager();

beforeAll(() => {
  context.setGlobalContextManager(manager);
});
afterAll(() => {
  context.disable();
});
afterEach(() => {
  exporter.reset();
  finished = [];
});

const lookup = defineTool({
  name: "lookup",
  description: "Looks a word up.",
  parameters: { type: "object", properties: { word: { type: "string" } }, required: ["word"] },
  execute: (args: Record<string, unknown>) => ({
    word: args.word,
    meaning: `the meaning of ${String(args.word)}`,
  }),
});

const failing = defineTool({
  name: "failing",
  description: "Always fails.",
  parameters: { type: "object", properties: {} },
  execute: () => {
    throw new RangeError("out of range");
  },
});

/** The spans ended so far (the processor exports each one a tick after it ends). */
let finished: ReadableSpan[] = [];
async function flush(): Promise<void> {
  await tracerProvider.forceFlush();
  finished = exporter.getFinishedSpans();
}

function spans(): ReadableSpan[] {
  return finished;
}

function named(name: string): ReadableSpan[] {
  return spans().filter((s) => s.name === name);
}

function one(name: string): ReadableSpan {
  const found = named(name);
  expect(found, name).toHaveLength(1);
  return found[0] as ReadableSpan;
}

const parentOf = (span: ReadableSpan) => span.parentSpanContext?.spanId;

async function events(agent: Agent, input: string): Promise<AgentEvent[]> {
  const out: AgentEvent[] = [];
  for await (const event of agent.stream(input)) out.push(event);
  return out;
}

describe("a run's spans (GenAI semantic conventions)", () => {
  it("invoke_agent, then chat per model call and execute_tool per tool call, with exactly the attributes of SPEC 11; no content by default", async () => {
    const model = scriptedModel(
      [
        {
          toolCalls: [{ id: "call_1", name: "lookup", arguments: { word: "otter" } }],
          usage: { inputTokens: 20, outputTokens: 5, cachedInputTokens: 8 },
        },
        { text: "An otter is a mammal.", usage: { inputTokens: 40, outputTokens: 7, reasoningTokens: 3 } },
      ],
      { id: "gpt-4o-mini" },
    );
    const agent = new Agent({ model, tools: [lookup], tracerProvider, instructions: "Be brief." });
    const all = await events(agent, "What is an otter?");
    await flush();
    const done = all.at(-1) as AgentEvent & { type: "turn_complete" };

    const run = one("invoke_agent agentloop");
    expect(run.kind).toBe(SpanKind.INTERNAL);
    expect(run.parentSpanContext).toBeUndefined();
    expect(run.attributes).toEqual({
      "gen_ai.operation.name": "invoke_agent",
      "gen_ai.agent.name": "agentloop",
      "agentloop.run.id": done.runId,
      "gen_ai.request.model": "gpt-4o-mini",
      "gen_ai.usage.input_tokens": 60,
      "gen_ai.usage.output_tokens": 12,
      "gen_ai.usage.cache_read.input_tokens": 8,
      "gen_ai.usage.reasoning.output_tokens": 3,
      "agentloop.stop_reason": "final_answer",
      "agentloop.iterations": 2,
    });
    expect(run.status.code).toBe(SpanStatusCode.UNSET);
    expect(done.traceId).toBe(run.spanContext().traceId);

    const chats = named("chat gpt-4o-mini");
    expect(chats).toHaveLength(2);
    for (const chat of chats) {
      expect(chat.kind).toBe(SpanKind.CLIENT);
      expect(parentOf(chat)).toBe(run.spanContext().spanId);
    }
    expect(chats[0]?.attributes).toEqual({
      "gen_ai.operation.name": "chat",
      "gen_ai.request.model": "gpt-4o-mini",
      "gen_ai.response.finish_reasons": ["tool_calls"],
      "gen_ai.usage.input_tokens": 20,
      "gen_ai.usage.output_tokens": 5,
      "gen_ai.usage.cache_read.input_tokens": 8,
    });
    expect(chats[1]?.attributes).toMatchObject({
      "gen_ai.response.finish_reasons": ["stop"],
      "gen_ai.usage.reasoning.output_tokens": 3,
    });

    const tool = one("execute_tool lookup");
    expect(tool.kind).toBe(SpanKind.INTERNAL);
    expect(parentOf(tool)).toBe(run.spanContext().spanId);
    expect(tool.attributes).toEqual({
      "gen_ai.operation.name": "execute_tool",
      "gen_ai.tool.name": "lookup",
      "gen_ai.tool.call.id": "call_1",
      "gen_ai.tool.type": "function",
    });
    expect(
      spans().some((s) =>
        Object.keys(s.attributes).some((k) => /messages|instructions|call\.(arguments|result)/.test(k)),
      ),
    ).toBe(false);
  });

  it("a real provider's spans: provider name, response id and model, server address and port", async () => {
    const server = await startFakeOpenAIServer({ respond: [{ text: "Hi." }] });
    try {
      const model = openAIChatModel({ model: "gpt-4o-mini", baseURL: server.url, apiKey: "sk-test" });
      await new Agent({ model, tracerProvider }).run("Hello");
      await flush();
      const chat = one("chat gpt-4o-mini");
      const port = Number(new URL(server.url).port);
      expect(chat.attributes).toMatchObject({
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.response.model": "gpt-4o-mini",
        "gen_ai.response.id": "chatcmpl-fake-0",
        "gen_ai.response.finish_reasons": ["stop"],
        "server.address": "127.0.0.1",
        "server.port": port,
      });
      expect(one("invoke_agent agentloop").attributes["gen_ai.provider.name"]).toBe("openai");
    } finally {
      await server.close();
    }
  });

  it("Anthropic and the Responses API: their provider names, response ids and models", async () => {
    const anthropic = await startFakeAnthropicServer({ respond: [{ text: "Hi." }] });
    const responses = await startFakeResponsesServer({ respond: [{ text: "Hi." }] });
    try {
      const claude = anthropicModel({ model: "claude-test", baseURL: anthropic.url, apiKey: "sk-ant-test" });
      await new Agent({ model: claude, tracerProvider }).run("Hello");
      const gpt = openAIResponsesModel({ model: "gpt-5", baseURL: responses.url, apiKey: "sk-test" });
      await new Agent({ model: gpt, tracerProvider }).run("Hello");
      await flush();
      expect(one("chat claude-test").attributes).toMatchObject({
        "gen_ai.provider.name": "anthropic",
        "gen_ai.response.id": "msg_fake_0",
        "gen_ai.response.model": "claude-test",
        "gen_ai.response.finish_reasons": ["end_turn"],
        "server.address": "127.0.0.1",
      });
      expect(one("chat gpt-5").attributes).toMatchObject({
        "gen_ai.provider.name": "openai",
        "gen_ai.response.id": "resp_fake_0",
        "gen_ai.response.model": "gpt-5",
        "gen_ai.response.finish_reasons": ["stop"],
      });
    } finally {
      await anthropic.close();
      await responses.close();
    }
  });

  it("a retried request is a chat span of its own: the 429 and the broken stream ERROR, the answer after them not", async () => {
    const server = await startFakeOpenAIServer({
      respond: [{ status: 429, headers: { "retry-after": "0" } }, { breakOff: true }, { text: "Hi." }],
    });
    try {
      const model = openAIChatModel({ model: "gpt-4o-mini", baseURL: server.url, apiKey: "sk-test" });
      const result = await new Agent({ model, tracerProvider }).run("Hello");
      await flush();
      expect(result.text).toBe("Hi.");
      const chats = named("chat gpt-4o-mini");
      expect(chats).toHaveLength(3);
      const run = one("invoke_agent agentloop");
      for (const chat of chats) expect(parentOf(chat)).toBe(run.spanContext().spanId);
      expect(chats[0]?.status.code).toBe(SpanStatusCode.ERROR);
      expect(chats[0]?.attributes["error.type"]).toBe("429");
      expect(chats[1]?.status.code).toBe(SpanStatusCode.ERROR);
      expect(chats[1]?.attributes["error.type"]).toBe("stream_incomplete");
      expect(chats[2]?.status.code).toBe(SpanStatusCode.UNSET);
      expect(chats[2]?.attributes).toMatchObject({
        "gen_ai.response.id": "chatcmpl-fake-2",
        "gen_ai.request.model": "gpt-4o-mini",
      });
      expect(run.status.code).toBe(SpanStatusCode.UNSET);
    } finally {
      await server.close();
    }
  });

  it("a model API that cannot be reached: each request's span is ERROR with the network error's code", async () => {
    const server = await startFakeOpenAIServer({ respond: [] });
    const url = server.url;
    await server.close();
    const model = openAIChatModel({ model: "gpt-4o-mini", baseURL: url, apiKey: "sk-test", maxRetries: 1 });
    const result = await new Agent({ model, tracerProvider }).run("Hello");
    await flush();
    expect(result.stopReason).toBe("model_error");
    const chats = named("chat gpt-4o-mini");
    expect(chats.length).toBeGreaterThanOrEqual(2);
    for (const chat of chats) {
      expect(chat.status.code).toBe(SpanStatusCode.ERROR);
      expect(chat.attributes["error.type"]).toBe("ECONNREFUSED");
    }
    expect(one("invoke_agent agentloop").attributes["error.type"]).toBe("model_error");
  });

  it("a failed model call and a run stopped by it are ERROR with error.type (the HTTP status, the stop reason)", async () => {
    const server = await startFakeOpenAIServer({
      respond: [{ status: 400, body: '{"error":{"message":"bad request"}}' }],
    });
    try {
      const model = openAIChatModel({ model: "gpt-4o-mini", baseURL: server.url, apiKey: "sk-test" });
      const result = await new Agent({ model, tracerProvider }).run("Hello");
      await flush();
      expect(result.stopReason).toBe("model_error");
      const chat = one("chat gpt-4o-mini");
      expect(chat.status.code).toBe(SpanStatusCode.ERROR);
      expect(chat.attributes["error.type"]).toBe("400");
      const run = one("invoke_agent agentloop");
      expect(run.status.code).toBe(SpanStatusCode.ERROR);
      expect(run.attributes["error.type"]).toBe("model_error");
    } finally {
      await server.close();
    }
  });

  it("a model error without a status has its code; a tool error result is ERROR, a circuit breaker stop too", async () => {
    const model = scriptedModel([
      { toolCalls: [{ id: "a", name: "failing" }] },
      { toolCalls: [{ id: "b", name: "failing" }] },
      { toolCalls: [{ id: "c", name: "nope" }] },
      { error: { code: "connection", message: "connect ECONNREFUSED" } },
    ]);
    const agent = new Agent({ model, tools: [failing], tracerProvider, circuitBreakerThreshold: 5 });
    const result = await agent.run("Go");
    await flush();
    expect(result.stopReason).toBe("model_error");
    const tools = named("execute_tool failing");
    expect(tools).toHaveLength(2);
    expect(tools[0]?.status).toEqual({
      code: SpanStatusCode.ERROR,
      message: expect.stringContaining("out of range"),
    });
    expect(tools[0]?.attributes["error.type"]).toBe("RangeError");
    expect(one("execute_tool nope").attributes["error.type"]).toBe("invalid_call");
    const failed = named("chat scripted").at(-1) as ReadableSpan;
    expect(failed.attributes["error.type"]).toBe("connection");

    exporter.reset();
    const looping = scriptedModel([
      { toolCalls: [{ id: "a", name: "failing" }] },
      { toolCalls: [{ id: "b", name: "failing" }] },
    ]);
    const breaker = await new Agent({
      model: looping,
      tools: [failing],
      tracerProvider,
      circuitBreakerThreshold: 2,
    }).run("Go");
    await flush();
    expect(breaker.stopReason).toBe("circuit_breaker");
    expect(one("invoke_agent agentloop").attributes["error.type"]).toBe("circuit_breaker");
  });

  it("content on: the conventions' message shapes, system instructions apart, tool arguments and results, secrets redacted", async () => {
    const secret = "sk-live-0123456789abcdef";
    const model = scriptedModel([
      {
        thinking: "Look it up.",
        toolCalls: [{ id: "call_1", name: "lookup", arguments: { word: `otter ${secret}` } }],
      },
      { text: `Done with ${secret}.` },
    ]);
    const agent = new Agent({
      model,
      tools: [lookup],
      tracerProvider,
      instructions: `Key ${secret}.`,
      secrets: [secret],
      captureMessageContent: true,
      name: "dictionary",
    });
    await agent.run(`Define otter (key ${secret})`);
    await flush();
    for (const span of spans()) expect(JSON.stringify(span.attributes)).not.toContain(secret);
    const [first, second] = named("chat scripted");
    expect(JSON.parse(String(first?.attributes["gen_ai.system_instructions"]))).toEqual([
      { type: "text", content: "Key [REDACTED]." },
    ]);
    expect(JSON.parse(String(first?.attributes["gen_ai.input.messages"]))).toEqual([
      { role: "user", parts: [{ type: "text", content: "Define otter (key [REDACTED])" }] },
    ]);
    expect(JSON.parse(String(first?.attributes["gen_ai.output.messages"]))).toEqual([
      {
        role: "assistant",
        parts: [
          { type: "reasoning", content: "Look it up." },
          { type: "tool_call", id: "call_1", name: "lookup", arguments: { word: "otter [REDACTED]" } },
        ],
        finish_reason: "tool_call",
      },
    ]);
    expect(JSON.parse(String(second?.attributes["gen_ai.input.messages"])).slice(1)).toEqual([
      {
        role: "assistant",
        parts: [
          { type: "reasoning", content: "Look it up." },
          { type: "tool_call", id: "call_1", name: "lookup", arguments: { word: "otter [REDACTED]" } },
        ],
      },
      {
        role: "tool",
        parts: [
          {
            type: "tool_call_response",
            id: "call_1",
            response: JSON.stringify({
              word: "otter [REDACTED]",
              meaning: "the meaning of otter [REDACTED]",
            }),
          },
        ],
      },
    ]);
    expect(JSON.parse(String(second?.attributes["gen_ai.output.messages"]))).toEqual([
      {
        role: "assistant",
        parts: [{ type: "text", content: "Done with [REDACTED]." }],
        finish_reason: "stop",
      },
    ]);
    const tool = one("execute_tool lookup");
    expect(JSON.parse(String(tool.attributes["gen_ai.tool.call.arguments"]))).toEqual({
      word: "otter [REDACTED]",
    });
    expect(JSON.parse(String(tool.attributes["gen_ai.tool.call.result"]))).toEqual({
      word: "otter [REDACTED]",
      meaning: "the meaning of otter [REDACTED]",
    });
    expect(one("invoke_agent dictionary").attributes["gen_ai.agent.name"]).toBe("dictionary");
  });

  it("content on from OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT (true, SPAN_ONLY, SPAN_AND_EVENT), off for other values", async () => {
    const previous = process.env.OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT;
    try {
      for (const [value, on] of [
        ["true", true],
        ["SPAN_ONLY", true],
        ["span_and_event", true],
        ["false", false],
        ["EVENT_ONLY", false],
        ["NO_CONTENT", false],
      ] as const) {
        process.env.OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT = value;
        exporter.reset();
        await new Agent({ model: scriptedModel([{ text: "Hi." }]), tracerProvider }).run("Hello");
        await flush();
        expect("gen_ai.input.messages" in one("chat scripted").attributes, value).toBe(on);
      }
    } finally {
      if (previous === undefined) delete process.env.OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT;
      else process.env.OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT = previous;
    }
  });

  it("a run started inside a tool's execute nests under that call's execute_tool span (sub-agents)", async () => {
    const child = new Agent({
      model: scriptedModel([{ text: "child answer" }]),
      tracerProvider,
      name: "researcher",
    });
    const delegate = defineTool({
      name: "delegate_task",
      description: "Delegates.",
      parameters: { type: "object", properties: { task: { type: "string" } } },
      execute: async (args: Record<string, unknown>) => (await child.run(String(args.task))).text,
    });
    const parent = new Agent({
      model: scriptedModel([
        { toolCalls: [{ id: "d1", name: "delegate_task", arguments: { task: "research" } }] },
        { text: "done" },
      ]),
      tools: [delegate],
      tracerProvider,
    });
    const result = await parent.run("Go");
    await flush();
    expect(result.text).toBe("done");
    const call = one("execute_tool delegate_task");
    const childRun = one("invoke_agent researcher");
    expect(parentOf(childRun)).toBe(call.spanContext().spanId);
    expect(childRun.spanContext().traceId).toBe(call.spanContext().traceId);
    expect(parentOf(one("invoke_agent agentloop"))).toBeUndefined();
  });

  it("a sub-agent's run through delegate_task is invoke_agent named by its delegation name, under execute_tool delegate_task", async () => {
    const researcher = new Agent({ model: scriptedModel([{ text: "child answer" }]), tracerProvider });
    const lead = new Agent({
      model: scriptedModel([
        {
          toolCalls: [
            { id: "d1", name: "delegate_task", arguments: { agent: "researcher", task: "research" } },
          ],
        },
        { text: "done" },
      ]),
      agents: { researcher },
      tracerProvider,
    });
    const result = await lead.run("Go");
    await flush();
    expect(result.text).toBe("done");
    const call = one("execute_tool delegate_task");
    const child = one("invoke_agent researcher");
    expect(child.attributes["gen_ai.agent.name"]).toBe("researcher");
    expect(parentOf(child)).toBe(call.spanContext().spanId);
    expect(parentOf(one("invoke_agent agentloop"))).toBeUndefined();
  });

  it("the active context is the run's parent; a resumed run continues the trace its state keeps", async () => {
    const guarded = defineTool({
      name: "guarded",
      description: "Needs approval.",
      parameters: { type: "object", properties: {} },
      needsApproval: true,
      execute: () => "ran",
    });
    const model = scriptedModel([{ toolCalls: [{ id: "g", name: "guarded" }] }, { text: "finished" }]);
    const agent = new Agent({ model, tools: [guarded], tracerProvider });
    const outer = tracerProvider.getTracer("test").startSpan("request");
    const waiting = await context.with(trace.setSpan(context.active(), outer), () => agent.run("Go"));
    outer.end();
    await flush();
    expect(waiting.stopReason).toBe("approval_required");
    const first = one("invoke_agent agentloop");
    expect(parentOf(first)).toBe(outer.spanContext().spanId);
    const stored = JSON.parse(JSON.stringify(waiting.state));
    expect(stored.traceparent).toBe(`00-${first.spanContext().traceId}-${first.spanContext().spanId}-01`);
    exporter.reset();
    const resumed = agent.resume(stored, { approve: "all" });
    const out: AgentEvent[] = [];
    for await (const event of resumed) out.push(event);
    await flush();
    const again = one("invoke_agent agentloop");
    expect(again.spanContext().traceId).toBe(first.spanContext().traceId);
    expect(parentOf(again)).toBe(first.spanContext().spanId);
    expect(out.at(-1)).toMatchObject({ type: "turn_complete", traceId: first.spanContext().traceId });
  });

  it("with no SDK registered and no tracerProvider, nothing is traced: no traceId, no trace context in the state", async () => {
    const agent = new Agent({ model: scriptedModel([{ text: "Hi." }]) });
    const all = await events(agent, "Hello");
    const done = all.at(-1) as AgentEvent & { type: "turn_complete" };
    expect(done.type).toBe("turn_complete");
    expect("traceId" in done).toBe(false);
    const result = await new Agent({ model: scriptedModel([{ text: "Hi." }]) }).run("Hello");
    await flush();
    expect(result.state.traceparent).toBeUndefined();
    expect(spans()).toEqual([]);
  });

  it("a compaction's summary call is a chat span of the run, its tokens on it (SPEC 13)", async () => {
    let calls = 0;
    const model = scriptedModel((request) => {
      if (request.system.startsWith("You compact"))
        return { text: "SUMMARY: keys were looked up.", usage: { inputTokens: 700, outputTokens: 9 } };
      calls++;
      return calls <= 12
        ? { toolCalls: [{ name: "lookup", arguments: { word: `${"long word ".repeat(40)}${calls}` } }] }
        : { text: "all done" };
    });
    const agent = new Agent({
      model,
      tools: [lookup],
      maxIterations: 20,
      maxContextTokens: 4000,
      compaction: { at: 0.5 },
      tracerProvider,
    });
    const all = await events(agent, "Look up twelve words.");
    await flush();
    const compactions = all.filter((e) => e.type === "compaction").length;
    expect(compactions).toBeGreaterThan(0);
    const chats = named("chat scripted");
    const summaries = chats.filter((span) => span.attributes["gen_ai.usage.input_tokens"] === 700);
    expect(summaries).toHaveLength(compactions);
    const run = one("invoke_agent agentloop");
    for (const span of summaries) {
      expect(parentOf(span)).toBe(run.spanContext().spanId);
      expect(span.attributes["gen_ai.operation.name"]).toBe("chat");
    }
  });
});
