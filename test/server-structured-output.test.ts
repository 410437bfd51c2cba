/**
 * A client's structured output request through the server, with the official `openai` client's
 * `responses.parse` / `chat.completions.parse`: Responses `text.format` and Chat Completions
 * `response_format` json_schema become the run's output schema (validated, sent on to the agent's
 * model), the content is only the validated JSON, and what cannot be honoured is a 400.
 */
import { zodResponseFormat, zodTextFormat } from "openai/helpers/zod";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { Agent } from "../src/index.js";
import { openAIResponsesModel } from "../src/models/openai-responses.js";
import { scriptedModel, startFakeResponsesServer } from "../src/testing/index.js";
import { builtinTools } from "../src/tools/builtin/index.js";
import { errorOf, post } from "./support/http.js";
import { listen } from "./support/listen.js";
import { fakeServerPerTest } from "./support/model-harness.js";

const Weather = z.object({ city: z.string(), celsius: z.number() });
const serveUpstream = fakeServerPerTest(startFakeResponsesServer);

/** An agent on a Responses API upstream: narration and a tool call, a rejected answer, then a valid one. */
async function upstreamAgent() {
  const upstream = await serveUpstream([
    { text: "Let me compute.", toolCalls: [{ name: "calculator", arguments: { expression: "20+1" } }] },
    { text: '{"city": "Paris"}' },
    { text: '{"city": "Paris", "celsius": 21}' },
  ]);
  const model = openAIResponsesModel({ model: "gpt-4o-mini", baseURL: upstream.url, apiKey: "sk-up-1234" });
  return { upstream, agent: new Agent({ model, tools: builtinTools() }) };
}

describe("structured output requested by the client", () => {
  it("responses.parse: text.format json_schema is the run's schema, sent on strict; output_text is only the JSON", async () => {
    const { upstream, agent } = await upstreamAgent();
    const { client } = await listen({ agents: { weather: agent } });
    const format = zodTextFormat(Weather, "weather");
    const response = await client.responses.parse({ model: "weather", input: "Paris?", text: { format } });
    expect(response.output_parsed).toEqual({ city: "Paris", celsius: 21 });
    expect(response.output_text).toBe('{"city":"Paris","celsius":21}');
    expect(response.text).toEqual({ format: JSON.parse(JSON.stringify(format)) });
    // The client's schema reached the agent's model, and the rejected answer went back corrected.
    expect(upstream.requests[0]?.body.text.format).toMatchObject({
      type: "json_schema",
      strict: true,
      schema: { properties: { city: { type: "string" }, celsius: { type: "number" } } },
    });
    expect(upstream.requests[2]?.body.input.at(-1).content).toMatch(/^Your final answer does not match/);

    // Streamed: the JSON once, at the end; the tool activity still in keepalive events.
    const again = await upstreamAgent();
    const served = await listen({ agents: { weather: again.agent } });
    const stream = served.client.responses.stream({ model: "weather", input: "Paris?", text: { format } });
    let deltas = "";
    let keepalives = 0;
    for await (const event of stream) {
      if (event.type === "response.output_text.delta") deltas += event.delta;
      if ((event.type as string) === "keepalive") keepalives++;
    }
    expect(deltas).toBe('{"city":"Paris","celsius":21}');
    expect(keepalives).toBeGreaterThan(0);
    expect((await stream.finalResponse()).output_parsed).toEqual({ city: "Paris", celsius: 21 });
  });

  it("chat.completions.parse: response_format json_schema likewise; json_object asks for any JSON object", async () => {
    const { agent } = await upstreamAgent();
    const model = scriptedModel([{ text: "Sure:" }, { text: '{"ok": true}' }]);
    const { client } = await listen({ agents: { weather: agent, free: new Agent({ model }) } });
    const completion = await client.chat.completions.parse({
      model: "weather",
      messages: [{ role: "user", content: "Paris?" }],
      response_format: zodResponseFormat(Weather, "weather"),
    });
    expect(completion.choices[0]?.message.parsed).toEqual({ city: "Paris", celsius: 21 });
    expect(completion.choices[0]?.message.content).toBe('{"city":"Paris","celsius":21}');

    const json = await client.chat.completions.create({
      model: "free",
      messages: [{ role: "user", content: "JSON please" }],
      response_format: { type: "json_object" },
    });
    expect(json.choices[0]?.message.content).toBe('{"ok":true}');
    expect(model.requests[1]?.messages.at(-1)?.content).toMatch(/^Your final answer does not match/);
  });

  it("answers 400 for a format it cannot honour, naming the field", async () => {
    const own = new Agent({ model: scriptedModel([]), outputSchema: Weather });
    const { baseURL } = await listen({ agents: { free: new Agent({ model: scriptedModel([]) }), own } });
    const cases: [string, unknown, string, string][] = [
      [
        "responses",
        {
          model: "free",
          input: "hi",
          text: { format: { type: "json_schema", name: "x", schema: { type: "array" } } },
        },
        'text.format.schema must describe a JSON object (type "object"), got type "array": wrap',
        "text.format.schema",
      ],
      [
        "responses",
        { model: "free", input: "hi", text: { format: { type: "grammar" } } },
        "text.format.type: 'grammar' is not supported here: use text, json_object or json_schema.",
        "text.format.type",
      ],
      [
        "chat/completions",
        {
          model: "free",
          messages: [{ role: "user", content: "hi" }],
          response_format: { type: "json_schema", json_schema: { name: "x" } },
        },
        "response_format.json_schema.schema: a json_schema format needs its JSON Schema (an object) here.",
        "response_format.json_schema.schema",
      ],
      [
        "responses",
        { model: "own", input: "hi", text: { format: zodTextFormat(Weather, "w") } },
        "The model 'own' answers with its own output schema: send no json_schema text.format (its answers are JSON objects valid against that schema).",
        "text.format",
      ],
    ];
    for (const [path, body, message, param] of cases) {
      const res = await post(`${baseURL}/${path}`, body);
      expect(res.status, message).toBe(400);
      const error = await errorOf(res);
      expect(error.message.startsWith(message), error.message).toBe(true);
      expect(error.param).toBe(param);
    }
  });
});
