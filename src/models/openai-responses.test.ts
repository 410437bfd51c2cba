/** The Responses adapter over real HTTP against the fake Responses server: request mapping, replies, failures, transport. */
import { afterEach, describe, expect, it, vi } from "vitest";
import {
  call,
  collect as collectEvents,
  deltaText,
  done,
  errorOf,
  fakeServerPerTest,
} from "../../test/support/model-harness.js";
import { describeTransport } from "../../test/support/transport-contract.js";
import type { AssistantMessage } from "../core/messages.js";
import { startFakeResponsesServer } from "../testing/fake-responses-server.js";
import type { ModelRequest } from "./adapter.js";
import { type OpenAIResponsesModelOptions, openAIResponsesModel } from "./openai-responses.js";
import { RESPONSES_DATA_KEY, type ReasoningRef } from "./openai-responses-wire.js";
import { DEFAULT_IDLE_TIMEOUT_MS } from "./request-guard.js";

const serve = fakeServerPerTest(startFakeResponsesServer);

afterEach(() => {
  vi.unstubAllEnvs();
});

const model = (options: Partial<OpenAIResponsesModelOptions>) =>
  openAIResponsesModel({ model: "test-model", apiKey: "sk-test-key-0000", maxRetries: 0, ...options });
const collect = (options: Partial<OpenAIResponsesModelOptions>, req?: ModelRequest) =>
  collectEvents(model(options), req);

const weather = {
  name: "get_weather",
  description: "Weather",
  parameters: { type: "object", properties: {} },
};

describe("openAIResponsesModel: the request", () => {
  it("sends a stateless request: instructions, input items, strict-free function tools, store false", async () => {
    const s = await serve([{ text: "ok" }]);
    const req: ModelRequest = {
      system: "Be brief.",
      messages: [
        { role: "user", content: "weather?" },
        { role: "assistant", content: "Looking.", toolCalls: [call("c1", "get_weather", '{"city":"Oslo"}')] },
        { role: "tool", toolCallId: "c1", name: "get_weather", content: "sunny", isError: false },
        { role: "assistant", content: "It is sunny." },
        { role: "user", content: "thanks" },
      ],
      tools: [weather],
    };
    await collect({ baseURL: s.url, parallelToolCalls: false, extraBody: { max_output_tokens: 100 } }, req);
    expect(s.requests[0]?.body).toEqual({
      model: "test-model",
      instructions: "Be brief.",
      input: [
        { role: "user", content: "weather?" },
        { type: "message", role: "assistant", content: "Looking." },
        { type: "function_call", call_id: "c1", name: "get_weather", arguments: '{"city":"Oslo"}' },
        { type: "function_call_output", call_id: "c1", output: "sunny" },
        { type: "message", role: "assistant", content: "It is sunny." },
        { role: "user", content: "thanks" },
      ],
      tools: [{ type: "function", ...weather, strict: false }],
      parallel_tool_calls: false,
      store: false,
      max_output_tokens: 100,
      stream: true,
    });
  });

  it("asks reasoning models for summaries and encrypted reasoning; others only when told", async () => {
    const s = await serve(() => ({ text: "ok" }));
    await collect({ baseURL: s.url, model: "gpt-5-mini" });
    await collect({ baseURL: s.url, model: "o4-mini", reasoning: { effort: "low", summary: "detailed" } });
    await collect({ baseURL: s.url, model: "gpt-5-mini", reasoning: false });
    await collect({ baseURL: s.url, model: "grok-4", reasoning: {} });
    const sent = s.requests.map((r) => [r.body.reasoning, r.body.include]);
    expect(sent).toEqual([
      [{ summary: "auto" }, ["reasoning.encrypted_content"]],
      [{ effort: "low", summary: "detailed" }, ["reasoning.encrypted_content"]],
      [undefined, undefined],
      [{}, ["reasoning.encrypted_content"]],
    ]);
  });
});

describe("openAIResponsesModel: structured output and images", () => {
  it("sends an output schema as text.format json_schema, strict when the schema allows, and says it constrains answers", async () => {
    const s = await serve([{ text: '{"city":"Oslo"}' }, { text: '{"city":"Oslo"}' }]);
    const schema = { type: "object", properties: { city: { type: "string" } }, required: ["city"] };
    const req = (output: Record<string, unknown>): ModelRequest => ({
      system: "",
      messages: [{ role: "user", content: "where?" }],
      tools: [],
      output: { name: "answer", schema: output },
    });
    await collect({ baseURL: s.url }, req(schema));
    // As Chat Completions' response_format: additionalProperties false added, strict.
    expect(s.requests[0]?.body.text).toEqual({
      format: {
        type: "json_schema",
        name: "answer",
        schema: { ...schema, additionalProperties: false },
        strict: true,
      },
    });
    // An optional property has no strict form: the schema goes as it is.
    const loose = { type: "object", properties: { city: { type: "string" } } };
    await collect({ baseURL: s.url }, req(loose));
    expect(s.requests[1]?.body.text).toEqual({
      format: { type: "json_schema", name: "answer", schema: loose, strict: false },
    });
    expect((model({}) as { structuredOutput?: boolean }).structuredOutput).toBe(true);
    expect((model({ structuredOutput: false }) as { structuredOutput?: boolean }).structuredOutput).toBe(
      false,
    );
  });

  it("sends images as input_image parts, in user messages and in tool results", async () => {
    const s = await serve([{ text: "A cat." }]);
    const image = { type: "image", url: "data:image/png;base64,iVBORw0KGgo=" };
    const messages = [
      { role: "user", content: "What is this?", media: [image] },
      { role: "assistant", content: "", toolCalls: [call("c1", "screenshot", "{}")] },
      {
        role: "tool",
        toolCallId: "c1",
        name: "screenshot",
        content: "[image: image/png, 8 B]",
        isError: false,
        media: [image],
      },
    ];
    await collect({ baseURL: s.url }, { system: "", messages, tools: [] } as unknown as ModelRequest);
    const input = s.requests[0]?.body.input;
    const part = { type: "input_image", image_url: image.url, detail: "auto" };
    expect(input[0]).toEqual({
      role: "user",
      content: [{ type: "input_text", text: "What is this?" }, part],
    });
    expect(input[2]).toEqual({
      type: "function_call_output",
      call_id: "c1",
      output: [{ type: "input_text", text: "[image: image/png, 8 B]" }, part],
    });
  });
});

describe("openAIResponsesModel: replies", () => {
  it("streams text and reasoning summaries, and reports usage with cached and reasoning tokens", async () => {
    const usage = { inputTokens: 120, outputTokens: 40, cachedInputTokens: 64, reasoningTokens: 22 };
    const s = await serve([{ reasoning: "Think first.", text: "Hello there, friend.", usage }]);
    const events = await collect({ baseURL: s.url });
    const reply = done(events);
    expect(deltaText(events, "thinking_delta")).toBe("Think first.");
    expect(deltaText(events, "text_delta")).toBe("Hello there, friend.");
    expect(events.filter((e) => e.type === "text_delta").length).toBeGreaterThan(1);
    expect(reply).toMatchObject({
      content: "Hello there, friend.",
      thinking: "Think first.",
      finishReason: "stop",
    });
    expect(reply.usage).toEqual(usage);
  });

  it("carries encrypted reasoning back on the next request, with its item id, before the calls it led to", async () => {
    const s = await serve([
      { reasoning: "Need the weather.", toolCalls: [{ name: "get_weather", arguments: { city: "Oslo" } }] },
      { text: "Sunny." },
    ]);
    const m = model({ baseURL: s.url, model: "gpt-5" });
    const first: ModelRequest = {
      system: "",
      messages: [{ role: "user", content: "weather?" }],
      tools: [weather],
    };
    const reply = done(await collectEvents(m, first));
    expect(reply.providerData).toEqual({
      [RESPONSES_DATA_KEY]: {
        items: [
          {
            type: "reasoning",
            id: "rs_fake_0",
            summary: [{ type: "summary_text", text: "Need the weather." }],
            encrypted_content: "enc_0",
          },
          { type: "function_call", call_id: "call_0_0" },
        ],
      },
    });
    // The loop keeps it on the assistant message; stored sessions keep it as plain JSON.
    const assistant: AssistantMessage = {
      role: "assistant",
      content: reply.content,
      toolCalls: reply.toolCalls,
      ...(reply.providerData && { providerData: JSON.parse(JSON.stringify(reply.providerData)) }),
    };
    const result = {
      role: "tool" as const,
      toolCallId: "call_0_0",
      name: "get_weather",
      content: "sunny",
      isError: false,
    };
    await collectEvents(m, { ...first, messages: [...first.messages, assistant, result] });
    // As the official SDKs send it with store: false (openai-agents-js, the AI SDK): id, summary, encrypted content.
    expect(s.requests[1]?.body.input.map((item: unknown) => JSON.stringify(item))).toEqual([
      '{"role":"user","content":"weather?"}',
      '{"type":"reasoning","id":"rs_fake_0","summary":[{"type":"summary_text","text":"Need the weather."}],"encrypted_content":"enc_0"}',
      '{"type":"function_call","call_id":"call_0_0","name":"get_weather","arguments":"{\\"city\\":\\"Oslo\\"}"}',
      '{"type":"function_call_output","call_id":"call_0_0","output":"sunny"}',
    ]);
    // A provider that gave the item no id: it goes back without one, with its encrypted content.
    const anonymous: ReasoningRef = {
      type: "reasoning",
      summary: [{ type: "summary_text", text: "Need the weather." }],
      encrypted_content: "enc_0",
    };
    const withoutId = { ...assistant, providerData: { [RESPONSES_DATA_KEY]: { items: [anonymous] } } };
    await collectEvents(m, { ...first, messages: [...first.messages, withoutId, result] });
    expect(s.requests[2]?.body.input[1]).toEqual({
      type: "reasoning",
      summary: [{ type: "summary_text", text: "Need the weather." }],
      encrypted_content: "enc_0",
    });
  });

  it("returns parallel function calls in call order, arguments assembled from their deltas", async () => {
    const toolCalls = [
      { id: "call_a", name: "get_weather", arguments: { city: "Oslo", units: "metric", detail: "full" } },
      { id: "call_b", name: "get_time", arguments: { timezone: "Europe/Oslo" } },
      { id: "call_c", name: "get_weather", arguments: {} },
    ];
    const s = await serve([{ toolCalls }]);
    const reply = done(await collect({ baseURL: s.url }));
    expect(reply.toolCalls).toEqual(toolCalls.map((c) => call(c.id, c.name, JSON.stringify(c.arguments))));
    expect(reply.finishReason).toBe("tool_calls");
  });

  it("keeps a refusal apart from the content", async () => {
    const s = await serve([{ refusal: "I can't help with that." }]);
    const events = await collect({ baseURL: s.url });
    expect(done(events)).toMatchObject({
      content: "",
      refusal: "I can't help with that.",
      finishReason: "stop",
    });
    expect(deltaText(events, "text_delta")).toBe("");
  });

  it("answers an incomplete response with its reason, and never runs the call it cut off", async () => {
    const s = await serve([
      {
        text: "Writing the file.",
        toolCalls: [{ name: "write_file", arguments: { path: "a.txt", text: "x".repeat(40) } }],
        end: "incomplete",
      },
    ]);
    const reply = done(await collect({ baseURL: s.url }));
    expect(reply.content).toBe("Writing the file.");
    expect(reply.finishReason).toBe("max_output_tokens");
    expect(reply.toolCalls[0]?.invalid).toMatch(/cut off before this tool call's arguments were complete/);
  });

  it("reads a non-streaming response the same way", async () => {
    const s = await serve([
      { reasoning: "Hmm.", text: "Done.", toolCalls: [{ id: "c9", name: "get_weather", arguments: {} }] },
    ]);
    const events = await collect({ baseURL: s.url, stream: false, model: "gpt-5" });
    expect(s.requests[0]?.body.stream).toBe(false);
    expect(events.map((e) => e.type)).toEqual(["thinking_delta", "text_delta", "done"]);
    expect(done(events)).toMatchObject({
      content: "Done.",
      thinking: "Hmm.",
      toolCalls: [call("c9", "get_weather", "{}")],
    });
  });
});

describe("openAIResponsesModel: failures end in one clear error", () => {
  it("a response.failed after some text is a provider_error naming the provider's message and code", async () => {
    const error = { code: "server_error", message: "The model had an error." };
    const s = await serve([{ text: "Partial", end: "failed", error }]);
    const events = await collect({ baseURL: s.url });
    expect(deltaText(events, "text_delta")).toBe("Partial");
    expect(errorOf(events)).toEqual({
      code: "provider_error",
      message: "Model API error: The model had an error. (server_error)",
    });
  });

  it("an error event mid-stream is a provider_error", async () => {
    const inject =
      'event: error\ndata: {"type":"error","code":"rate_limit_exceeded","message":"Rate limit reached","param":null}\n\n';
    const s = await serve([{ text: "never", inject }]);
    expect(errorOf(await collect({ baseURL: s.url }))).toEqual({
      code: "provider_error",
      message: "Model API error: Rate limit reached",
    });
  });

  it("a stream that ends without response.completed is stream_incomplete, retried from scratch when nothing streamed", async () => {
    const opening =
      'event: response.created\ndata: {"type":"response.created","response":{"id":"r","status":"in_progress","output":[]}}\n\n';
    const s = await serve([{ raw: opening }, { raw: opening }]);
    expect(errorOf(await collect({ baseURL: s.url, maxRetries: 1 }))).toEqual({
      code: "stream_incomplete",
      message: "Model API stream ended before the response was complete (no response.completed event)",
    });
    expect(s.requests).toHaveLength(2);
  });

  it("HTTP errors keep their status; a missing API key is one line", async () => {
    const s = await serve([
      {
        status: 400,
        body: '{"error":{"message":"Invalid \'input\'.","type":"invalid_request_error","code":null,"param":"input"}}',
      },
    ]);
    expect(errorOf(await collect({ baseURL: s.url }))).toEqual({
      code: "http_400",
      status: 400,
      message: "Model API error (HTTP 400): Invalid 'input'.",
    });
    vi.stubEnv("OPENAI_API_KEY", "");
    vi.stubEnv("OPENAI_BASE_URL", "");
    const events = await collectEvents(openAIResponsesModel({ model: "gpt-5" }));
    expect(errorOf(events).code).toBe("missing_api_key");
  });
});

describeTransport("openAIResponsesModel", {
  serve,
  model: (options) => openAIResponsesModel({ model: "test-model", apiKey: "sk-test-key-0000", ...options }),
  defaultIdleTimeoutMs: DEFAULT_IDLE_TIMEOUT_MS,
  openingOnly:
    'event: response.created\ndata: {"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","output":[]}}\n\n',
  serveToolCalls: (count) =>
    serve(() => ({
      toolCalls: Array.from({ length: count }, (_, i) => ({
        name: "f",
        arguments: { text: "x".repeat(40 + i) },
      })),
    })),
});
