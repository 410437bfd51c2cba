// Structured output through the library: `outputSchema` (zod or JSON Schema), the answer checked
// and typed, corrections, the circuit breaker, explicit mode, resumed runs, and the request bytes
// each provider gets (fake servers speaking the real protocols, and recorded real answers).
import { describe, expect, expectTypeOf, it } from "vitest";
import { z } from "zod";
import { Agent, type AgentEvent, AgentloopError, defineTool } from "../src/index.js";
import { anthropicModel } from "../src/models/anthropic.js";
import { openAIChatModel } from "../src/models/openai-chat.js";
import { openAIResponsesModel } from "../src/models/openai-responses.js";
import {
  scriptedModel,
  startFakeAnthropicServer,
  startFakeOpenAIServer,
  startFakeResponsesServer,
} from "../src/testing/index.js";
import { fakeServerPerTest } from "./support/model-harness.js";
import { peerEntries, peerResponse } from "./support/peer-recordings.js";

const Weather = z.object({ city: z.string(), celsius: z.number() });
const PARIS = '{"city":"Paris","celsius":21}';
/** `Weather` as both OpenAI APIs receive it: strict JSON Schema. */
const STRICT_WEATHER = {
  type: "object",
  properties: { city: { type: "string" }, celsius: { type: "number" } },
  required: ["city", "celsius"],
  additionalProperties: false,
};

const lookup = defineTool({
  name: "lookup",
  description: "The weather of a city.",
  parameters: z.object({ city: z.string() }),
  execute: ({ city }) => `${city}: 21 °C, sunny`,
});

const serveOpenAI = fakeServerPerTest(startFakeOpenAIServer);
const serveAnthropic = fakeServerPerTest(startFakeAnthropicServer);
const serveResponses = fakeServerPerTest(startFakeResponsesServer);

describe("outputSchema", () => {
  it("gives the validated, typed object as result.output after tool calls, and its JSON as text", async () => {
    const model = scriptedModel([
      { toolCalls: [{ name: "lookup", arguments: { city: "Paris" } }] },
      { text: `\`\`\`json\n{"city": "Paris", "celsius": 21}\n\`\`\`` },
    ]);
    const agent = new Agent({ model, tools: [lookup], outputSchema: Weather });
    const events: AgentEvent[] = [];
    const run = agent.stream("Weather in Paris?");
    for await (const event of run) events.push(event);
    const result = await run.result;
    expectTypeOf(result.output).toEqualTypeOf<{ city: string; celsius: number } | undefined>();
    expect(result).toMatchObject({ stopReason: "final_answer", output: { city: "Paris", celsius: 21 } });
    expect(result.text).toBe(PARIS);
    expect(events.at(-1)).toMatchObject({ type: "turn_complete", output: PARIS });
    // The scripted model has no native structured output: the system prompt carries the schema.
    expect(model.requests[0]?.system).toContain(
      '{"type":"object","properties":{"city":{"type":"string"},"celsius":{"type":"number"}}',
    );
    expect(model.requests[0]).not.toHaveProperty("output");
  });

  it("sends an answer that does not validate back with the errors, then takes the corrected one", async () => {
    const model = scriptedModel([{ text: '{"city":"Paris"}' }, { text: PARIS }]);
    const result = await new Agent({ model, outputSchema: Weather }).run("Weather in Paris?");
    expect(result).toMatchObject({ stopReason: "final_answer", iterations: 2, output: { celsius: 21 } });
    const correction = model.requests[1]?.messages.at(-1);
    expect(correction?.role).toBe("user");
    expect(correction?.content).toMatch(
      /^Your final answer does not match the required output schema: celsius: /,
    );
  });

  it("ends with circuit_breaker and one clear message when the model ignores the schema", async () => {
    const model = scriptedModel([{ text: "Sunny." }, { text: "It is sunny!" }, { text: "Warm and sunny." }]);
    const result = await new Agent({ model, outputSchema: Weather }).run("Weather in Paris?");
    expect(result).toMatchObject({ stopReason: "circuit_breaker", iterations: 3, output: undefined });
    expect(result.text).toBe("Warm and sunny.");
    expect(result.error?.message).toBe(
      "The same error repeated 3 times in a row: the final answer does not match the output schema (the answer is not JSON)",
    );
  });

  it("refuses a schema that is not an object, at construction", () => {
    const model = scriptedModel([]);
    expect(() => new Agent({ model, outputSchema: z.array(z.string()) })).toThrow(
      /^outputSchema must describe a JSON object \(type "object"\), got type "array": wrap the value in one, e\.g\. z\.object/,
    );
    expect(() => new Agent({ model, outputSchema: { type: "string" } })).toThrow(AgentloopError);
  });

  it("takes a JSON Schema, whose answer is a plain object", async () => {
    const schema = { type: "object", properties: { n: { type: "integer" } }, required: ["n"] };
    const model = scriptedModel([{ text: '{"n": 1.5}' }, { text: '{"n": 2}' }]);
    const result = await new Agent({ model, outputSchema: schema }).run("A number?");
    expectTypeOf(result.output).toEqualTypeOf<Record<string, unknown> | undefined>();
    expect(result.output).toEqual({ n: 2 });
    expect(model.requests[1]?.messages.at(-1)?.content).toContain("n: ");
  });

  it("makes the schema the result of task_completion in explicit mode", async () => {
    const model = scriptedModel([
      { toolCalls: [{ name: "task_completion", arguments: { result: { city: "Paris" } } }] },
      { toolCalls: [{ name: "task_completion", arguments: { result: { city: "Paris", celsius: 21 } } }] },
    ]);
    const agent = new Agent({ model, mode: "explicit", outputSchema: Weather });
    const events: AgentEvent[] = [];
    const run = agent.stream("Weather in Paris?");
    for await (const event of run) events.push(event);
    const result = await run.result;
    expect(result).toMatchObject({ stopReason: "task_completion", output: { city: "Paris", celsius: 21 } });
    expect(result.text).toBe(PARIS);
    const first = events.find((e) => e.type === "tool_result");
    expect(first).toMatchObject({ isError: true });
    expect(first?.type === "tool_result" && first.content).toMatch(
      /^Invalid arguments for 'task_completion': result\.celsius: /,
    );
    const tool = model.requests[0]?.tools.find((t) => t.name === "task_completion");
    expect(tool?.parameters).toMatchObject({
      properties: { result: { type: "object" } },
      required: ["result"],
    });
  });

  it("ends a refusal with model_error (code refusal) and no output, without asking again", async () => {
    // The Responses API's refusal part, through the real adapter.
    const server = await serveResponses([{ refusal: "I'm sorry,\nI can't help with that." }]);
    const model = openAIResponsesModel({ model: "gpt-4o-mini", baseURL: server.url, apiKey: "sk-test-1234" });
    const run = new Agent({ model, outputSchema: Weather }).stream("?");
    const events: AgentEvent[] = [];
    for await (const event of run) events.push(event);
    const result = await run.result;
    expect(result).toMatchObject({ stopReason: "model_error", iterations: 1, output: undefined, text: "" });
    expect(result.refusal).toBe("I'm sorry,\nI can't help with that.");
    const message =
      "The model refused to give an answer for the output schema: I'm sorry, I can't help with that.";
    expect(result.error).toEqual({ code: "refusal", message });
    expect(events.slice(-2)).toMatchObject([
      { type: "error", code: "refusal", message },
      { type: "turn_complete", stopReason: "model_error", output: "" },
    ]);
    expect(server.requests).toHaveLength(1);
    // Without a schema a refusal is the answer, as before.
    const plain = await serveResponses([{ refusal: "No." }]);
    const free = openAIResponsesModel({ model: "gpt-4o-mini", baseURL: plain.url, apiKey: "sk-test-1234" });
    expect(await new Agent({ model: free }).run("?")).toMatchObject({
      stopReason: "final_answer",
      output: "No.",
      refusal: "No.",
    });
  });

  it("tells the model its answer was cut off at the output token limit (Chat and Responses), not that it is not JSON", async () => {
    const cut = '{"city": "Par';
    const chat = await serveOpenAI([{ text: cut, finishReason: "length" }, { text: PARIS }]);
    const responses = await serveResponses([{ text: cut, end: "incomplete" }, { text: PARIS }]);
    const options = { model: "gpt-4o-mini", apiKey: "sk-test-1234" };
    for (const model of [
      openAIChatModel({ ...options, baseURL: chat.url }),
      openAIResponsesModel({ ...options, baseURL: responses.url }),
    ]) {
      const result = await new Agent({ model, outputSchema: Weather }).run("Weather?");
      expect(result).toMatchObject({ stopReason: "final_answer", iterations: 2, output: { celsius: 21 } });
      expect(result.steps[0]?.incomplete).toBe("length");
      expect(result.incomplete).toBeUndefined(); // the answer taken was complete
      expect(result.messages.at(-2)?.content).toBe(
        "Your final answer was cut off at the output token limit before it was complete, so it is not a valid JSON object. Reply with only a shorter JSON object valid against the required output schema.",
      );
    }
    const always = await serveOpenAI(() => ({ text: cut, finishReason: "length" }));
    const model = openAIChatModel({ ...options, baseURL: always.url });
    const result = await new Agent({ model, outputSchema: Weather }).run("Weather?");
    expect(result).toMatchObject({ stopReason: "circuit_breaker", output: undefined, incomplete: "length" });
    expect(result.error?.message).toBe(
      "The same error repeated 3 times in a row: the final answer was cut off at the output token limit (finish reason length), so it is not complete JSON",
    );
  });

  it("marks a truncated answer without a schema: result.incomplete, the step and turn_complete", async () => {
    const chat = await serveOpenAI([{ text: "The first three primes are 2, 3", finishReason: "length" }]);
    const responses = await serveResponses([
      { text: "The first three primes are 2, 3", end: "incomplete", incompleteReason: "content_filter" },
    ]);
    const options = { model: "gpt-4o-mini", apiKey: "sk-test-1234" };
    for (const [model, reason] of [
      [openAIChatModel({ ...options, baseURL: chat.url }), "length"],
      [openAIResponsesModel({ ...options, baseURL: responses.url }), "content_filter"],
    ] as const) {
      const run = new Agent({ model }).stream("Primes?");
      const events: AgentEvent[] = [];
      for await (const event of run) events.push(event);
      const result = await run.result;
      expect(result).toMatchObject({
        stopReason: "final_answer",
        output: "The first three primes are 2, 3",
        incomplete: reason,
      });
      expect(result.steps[0]).toMatchObject({ incomplete: reason });
      expect(events.at(-1)).toMatchObject({ type: "turn_complete", incomplete: reason });
    }
    const whole = await serveOpenAI([{ text: "2, 3, 5." }]);
    const result = await new Agent({ model: openAIChatModel({ ...options, baseURL: whole.url }) }).run("?");
    expect(result).not.toHaveProperty("incomplete");
    expect(result.steps[0]).not.toHaveProperty("incomplete");
  });

  it("takes an outputSchema for one run of an agent without one, typed and kept by the run's state", async () => {
    const model = scriptedModel([{ text: '{"city":"Paris"}' }, { text: PARIS }, { text: "Plain text." }]);
    const agent = new Agent({ model });
    const result = await agent.run("Weather?", { outputSchema: Weather });
    expectTypeOf(result.output).toEqualTypeOf<{ city: string; celsius: number } | undefined>();
    expect(result).toMatchObject({ stopReason: "final_answer", iterations: 2, output: { celsius: 21 } });
    expect(result.state.outputSchema).toMatchObject({ required: ["city", "celsius"] });
    expect(model.requests[0]?.system).toContain('"celsius":{"type":"number"}');
    // The next run without one answers in text again.
    expect((await agent.run("And?")).output).toBe("Plain text.");
    expect(() => agent.run("?", { outputSchema: { type: "array" } })).toThrow(
      /^outputSchema must describe a JSON object/,
    );
    const typed = new Agent({ model, outputSchema: Weather });
    // @ts-expect-error an agent's own schema cannot be replaced by a run's
    expect(() => typed.run("?", { outputSchema: Weather })).toThrow(
      "outputSchema: this agent has its own outputSchema, which a run cannot replace: create an Agent without one, or with this schema.",
    );
  });

  it("still validates the answer of a stored run resumed by an agent given no schema", async () => {
    const write = defineTool({
      name: "write",
      description: "Writes a note.",
      parameters: z.object({ note: z.string() }),
      needsApproval: true,
      execute: () => "written",
    });
    const first = new Agent({
      model: scriptedModel([{ toolCalls: [{ name: "write", arguments: { note: "x" } }] }]),
      tools: [write],
      outputSchema: Weather,
    });
    const waiting = await first.run("Note it, then the weather.");
    expect(waiting.stopReason).toBe("approval_required");
    const stored = JSON.parse(JSON.stringify(waiting.state)); // what a store keeps
    const model = scriptedModel([{ text: '{"city":"Paris","celsius":"warm"}' }, { text: PARIS }]);
    const resumed = await new Agent({ model, tools: [write] }).resume(stored, { approve: "all" }).result;
    expect(resumed.stopReason).toBe("final_answer");
    expect(resumed.output as unknown).toEqual({ city: "Paris", celsius: 21 });
    expect(model.requests[0]?.system).toContain('"celsius":{"type":"number"}');
    expect(model.requests[1]?.messages.at(-1)?.content).toMatch(/celsius: /);
  });
});

describe("outputSchema on the wire", () => {
  it("OpenAI: response_format json_schema with the tools, strict when the schema allows", async () => {
    const server = await serveOpenAI([
      { toolCalls: [{ name: "lookup", arguments: { city: "Paris" } }] },
      { text: PARIS },
      { text: '{"city":"Paris"}' },
    ]);
    const model = openAIChatModel({ model: "gpt-4o-mini", baseURL: server.url, apiKey: "sk-test-1234" });
    const result = await new Agent({ model, tools: [lookup], outputSchema: Weather }).run("Weather?");
    expect(result.output).toEqual({ city: "Paris", celsius: 21 });
    const body = server.requests[0]?.body;
    expect(body.tools).toHaveLength(1);
    expect(body.response_format).toEqual({
      type: "json_schema",
      json_schema: {
        name: "final_output",
        strict: true,
        schema: STRICT_WEATHER,
      },
    });
    // Native: the system prompt does not repeat the schema.
    expect(JSON.stringify(body.messages)).not.toContain("JSON Schema");

    const loose = z.object({ city: z.string(), celsius: z.number().optional() });
    await new Agent({ model, outputSchema: loose }).run("Weather?");
    expect(server.requests[2]?.body.response_format.json_schema).toMatchObject({
      strict: false,
      schema: { required: ["city"] },
    });
  });

  it("Responses: text.format json_schema with the tools, strict when the schema allows, as for Chat", async () => {
    const server = await serveResponses([
      { toolCalls: [{ name: "lookup", arguments: { city: "Paris" } }] },
      { text: PARIS },
      { text: PARIS },
    ]);
    const model = openAIResponsesModel({ model: "gpt-4o-mini", baseURL: server.url, apiKey: "sk-test-1234" });
    const result = await new Agent({ model, tools: [lookup], outputSchema: Weather }).run("Weather?");
    expect(result.output).toEqual({ city: "Paris", celsius: 21 });
    const body = server.requests[0]?.body;
    expect(body.tools).toHaveLength(1);
    // The same name, schema and strictness as Chat Completions' response_format.json_schema above.
    expect(body.text).toEqual({
      format: {
        type: "json_schema",
        name: "final_output",
        strict: true,
        schema: STRICT_WEATHER,
      },
    });

    const loose = z.object({ city: z.string(), celsius: z.number().optional() });
    await new Agent({ model, outputSchema: loose }).run("Weather?");
    expect(server.requests[2]?.body.text.format).toMatchObject({
      strict: false,
      schema: { required: ["city"] },
    });
  });

  it("OpenAI with structuredOutput: false describes the schema in the system prompt instead", async () => {
    const server = await serveOpenAI([{ text: PARIS }]);
    const model = openAIChatModel({
      model: "deepseek-chat",
      baseURL: server.url,
      apiKey: "sk-test-1234",
      structuredOutput: false,
    });
    const result = await new Agent({ model, outputSchema: Weather }).run("Weather?");
    expect(result.output).toEqual({ city: "Paris", celsius: 21 });
    const body = server.requests[0]?.body;
    expect(body).not.toHaveProperty("response_format");
    expect(body.messages[0].content).toContain("valid against this JSON Schema");
  });

  it("with the xml tool protocol describes the schema in the system prompt (no response_format)", async () => {
    const server = await serveOpenAI([{ text: PARIS }]);
    const model = openAIChatModel({ model: "gpt-4o-mini", baseURL: server.url, apiKey: "sk-test-1234" });
    const agent = new Agent({ model, tools: [lookup], toolProtocol: "xml", outputSchema: Weather });
    expect((await agent.run("Weather?")).output).toEqual({ city: "Paris", celsius: 21 });
    const body = server.requests[0]?.body;
    expect(body).not.toHaveProperty("response_format");
    expect(body.messages[0].content).toContain("valid against this JSON Schema");
  });

  it("Anthropic: output_config.format, or a forced output tool for models without it", async () => {
    const server = await serveAnthropic([
      { text: PARIS },
      { toolCalls: [{ name: "final_output", input: { city: "Paris", celsius: 21 } }] },
    ]);
    const options = { baseURL: server.url, apiKey: "sk-ant-test-1234" };
    const native = anthropicModel({ ...options, model: "claude-sonnet-4-5" });
    const first = await new Agent({ model: native, tools: [lookup], outputSchema: Weather }).run("Weather?");
    expect(first.output).toEqual({ city: "Paris", celsius: 21 });
    const body = server.requests[0]?.body;
    expect(body.output_config).toEqual({
      format: {
        type: "json_schema",
        schema: STRICT_WEATHER,
      },
    });
    expect(body).not.toHaveProperty("tool_choice");

    const older = anthropicModel({ ...options, model: "claude-3-5-haiku-latest" });
    const run = new Agent({ model: older, tools: [lookup], outputSchema: Weather }).stream("Weather?");
    let streamed = "";
    for await (const event of run) if (event.type === "message_delta") streamed += event.text;
    const second = await run.result;
    expect(JSON.parse(streamed)).toEqual({ city: "Paris", celsius: 21 }); // the answer streams like text
    expect(second).toMatchObject({ stopReason: "final_answer", iterations: 1, text: PARIS });
    expect(second.output).toEqual({ city: "Paris", celsius: 21 });
    const forced = server.requests[1]?.body;
    expect(forced).not.toHaveProperty("output_config");
    expect(forced.tool_choice).toEqual({ type: "any" });
    expect(forced.tools.map((t: { name: string }) => t.name)).toEqual(["lookup", "final_output"]);
  });

  it("validates structured answers recorded from the real OpenAI and Anthropic APIs", async () => {
    const entries = peerEntries();
    if (entries.length === 0) return; // the shared fixtures are absent
    const answer = (id: string) => {
      const entry = entries.find((e) => e.id === id);
      if (!entry) throw new Error(`no recording ${id}`);
      const { body, status, contentType } = peerResponse(entry);
      return { raw: body, status, headers: { "content-type": contentType } };
    };
    const chat = await serveOpenAI(() => answer("openai-python-parse-pydantic-model"));
    const location = z.object({ city: z.string(), temperature: z.number(), units: z.enum(["c", "f"]) });
    const openai = openAIChatModel({ model: "gpt-4o-2024-08-06", baseURL: chat.url, apiKey: "sk-test-1234" });
    const one = await new Agent({ model: openai, outputSchema: location }).run("Weather in SF?");
    expect(one.output).toEqual({ city: "San Francisco", temperature: 61, units: "f" });

    const messages = await serveAnthropic(() => answer("vercel-anthropic-json-output-format.1"));
    const party = z.object({
      characters: z.array(z.object({ name: z.string(), class: z.string(), description: z.string() })),
    });
    const claude = anthropicModel({
      model: "claude-sonnet-4-5",
      baseURL: messages.url,
      apiKey: "sk-ant-1234",
    });
    const two = await new Agent({ model: claude, outputSchema: party }).run("Three characters.");
    expect(two.stopReason).toBe("final_answer");
    expect(two.output?.characters[0]?.name).toBe("Theron Ironheart");
  });
});
