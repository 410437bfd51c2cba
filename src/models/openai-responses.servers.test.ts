/**
 * The Responses adapter against servers other than OpenAI's, through an Agent: llama.cpp's event
 * stream (no `output_index`), its refusal of an assistant item without a type, and encrypted
 * reasoning behind a model id the adapter does not know (an Azure deployment name).
 */
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { fakeServerPerTest } from "../../test/support/model-harness.js";
import { Agent } from "../agent/agent.js";
import { startFakeResponsesServer } from "../testing/fake-responses-server.js";
import { defineTool } from "../tools/tool.js";
import { openAIResponsesModel } from "./openai-responses.js";
import { ResponsesStreamAssembler } from "./responses-assembler.js";

const serve = fakeServerPerTest(startFakeResponsesServer);

const weather = defineTool({
  name: "get_weather",
  description: "Weather in a city.",
  parameters: z.object({ city: z.string() }),
  execute: ({ city }) => `sunny in ${city}`,
});

const agentOn = (url: string, model = "local-model") =>
  new Agent({
    model: openAIResponsesModel({ model, apiKey: "sk-test", baseURL: url, maxRetries: 0 }),
    tools: [weather],
  });

describe("llama.cpp's Responses stream", () => {
  it("matches events without output_index by item_id: the text once, each call whole", async () => {
    const s = await serve([
      {
        llamaCppEvents: true,
        reasoning: "Two cities.",
        text: "Checking both.",
        toolCalls: [
          { id: "fc_a", name: "get_weather", arguments: { city: "Oslo" } },
          { id: "fc_b", name: "get_weather", arguments: { city: "Rome" } },
        ],
      },
      { llamaCppEvents: true, text: "Sunny in both." },
    ]);
    const result = await agentOn(s.url).run("weather in Oslo and Rome?");
    expect(result.output).toBe("Sunny in both.");
    expect(result.messages[1]).toMatchObject({
      role: "assistant",
      content: "Checking both.",
      thinking: "Two cities.",
      toolCalls: [
        { id: "fc_a", name: "get_weather", arguments: '{"city":"Oslo"}' },
        { id: "fc_b", name: "get_weather", arguments: '{"city":"Rome"}' },
      ],
    });
    // The assistant item goes with its type, which llama.cpp requires.
    expect(s.requests[1]?.body.input).toEqual([
      { role: "user", content: "weather in Oslo and Rome?" },
      { type: "message", role: "assistant", content: "Checking both." },
      { type: "function_call", call_id: "fc_a", name: "get_weather", arguments: '{"city":"Oslo"}' },
      { type: "function_call", call_id: "fc_b", name: "get_weather", arguments: '{"city":"Rome"}' },
      { type: "function_call_output", call_id: "fc_a", output: "sunny in Oslo" },
      { type: "function_call_output", call_id: "fc_b", output: "sunny in Rome" },
    ]);
  });

  it("keeps two calls with one call_id apart (each announced item is a new one); the loop makes the ids unique", async () => {
    const s = await serve([
      {
        llamaCppEvents: true,
        toolCalls: [
          { id: "x", name: "get_weather", arguments: { city: "Oslo" } },
          { id: "x", name: "get_weather", arguments: { city: "Rome" } },
        ],
      },
      { llamaCppEvents: true, text: "Sunny in both." },
    ]);
    const result = await agentOn(s.url).run("weather in Oslo and Rome?");
    expect(result.output).toBe("Sunny in both.");
    expect(result.messages[1]).toMatchObject({
      toolCalls: [
        { id: "x", name: "get_weather", arguments: '{"city":"Oslo"}' },
        { id: "x_2", name: "get_weather", arguments: '{"city":"Rome"}' },
      ],
    });
  });

  it("a done event naming an item never announced still goes to the last item", () => {
    const a = new ResponsesStreamAssembler();
    const events = [
      { type: "response.output_text.delta", item_id: "m1", delta: "Hi" },
      { type: "response.output_text.done", item_id: "m1", text: "Hi" },
      { type: "response.completed", response: { status: "completed", output: [] } },
    ].flatMap((e) => a.push(e));
    expect(events).toEqual([{ type: "text_delta", text: "Hi" }]);
    expect(a.reply().content).toBe("Hi");
  });
});

describe("encrypted reasoning behind a model id the adapter does not know", () => {
  it("is asked for once a reply in the history carried it", async () => {
    const s = await serve([
      {
        reasoning: "Need the weather.",
        encryptedReasoning: "enc_first",
        toolCalls: [{ name: "get_weather", arguments: { city: "Oslo" } }],
      },
      { reasoning: "Done.", text: "Sunny." },
    ]);
    const agent = agentOn(s.url, "my-azure-deployment");
    const result = await agent.run("weather?");
    expect(result.output).toBe("Sunny.");
    expect(s.requests[0]?.body.include).toBeUndefined();
    expect(s.requests[1]?.body.include).toEqual(["reasoning.encrypted_content"]);
    expect(s.requests[1]?.body.reasoning).toBeUndefined();
    expect(s.requests[1]?.body.input[1]).toMatchObject({ type: "reasoning", encrypted_content: "enc_first" });
    // The second reply's reasoning was encrypted because it was asked for: kept for the next turn.
    expect(result.messages.at(-1)?.role === "assistant" && result.messages.at(-1)).toMatchObject({
      providerData: {
        "openai-responses": { items: [{ type: "reasoning", encrypted_content: "enc_1" }, {}] },
      },
    });
    // The next turn, from the stored history, asks alike; `reasoning: false` asks for nothing.
    await agent.run("and tomorrow?", { history: result.messages });
    expect(s.requests[2]?.body.include).toEqual(["reasoning.encrypted_content"]);
  });

  it("is not asked for with reasoning: false, nor before any reply showed it", async () => {
    const s = await serve(() => ({ text: "ok" }));
    const history = [
      { role: "user" as const, content: "hi" },
      {
        role: "assistant" as const,
        content: "hello",
        providerData: {
          "openai-responses": {
            items: [{ type: "reasoning", summary: [], encrypted_content: "enc" }, { type: "message" }],
          },
        },
      },
    ];
    const off = openAIResponsesModel({
      model: "x",
      apiKey: "sk-test",
      baseURL: s.url,
      maxRetries: 0,
      reasoning: false,
    });
    await new Agent({ model: off }).run("again", { history });
    await agentOn(s.url, "x").run("first");
    expect(s.requests.map((r) => r.body.include)).toEqual([undefined, undefined]);
  });
});
