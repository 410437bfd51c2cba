// The client's own tools (SPEC section 14) through the official `openai` client against the built
// `agentloop serve`, a fake upstream model behind it: the model calls the agent's calculator and the
// client's get_weather in one reply; the calculator runs once, the client gets get_weather as a
// standard tool call, sends its result, and the same run goes on to its answer.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { afterEach, describe, expect, it } from "vitest";
import { type FakeOpenAIServer, startFakeOpenAIServer } from "../src/testing/fake-openai-server.js";
import { startServe } from "./support/serve-process.js";

let upstream: FakeOpenAIServer;
afterEach(async () => {
  await upstream?.close();
});

type Wire = { role: string; content?: string | null; tool_call_id?: string; name?: string };

async function setup() {
  upstream = await startFakeOpenAIServer({
    respond: (request) => {
      const body = request.body as { messages: Wire[]; tools?: { function: { name: string } }[] };
      if (body.messages.at(-1)?.role === "tool") return { text: "Sunny in Paris, and 6 * 7 = 42." };
      if ((body.tools ?? []).some((t) => t.function.name === "get_weather"))
        return {
          text: "Let me check.",
          toolCalls: [
            { name: "calculator", arguments: { expression: "6 * 7" } },
            { name: "get_weather", arguments: { location: "Paris" } },
          ],
        };
      return { text: "No tools here." };
    },
  });
  const cwd = mkdtempSync(join(tmpdir(), "agentloop-client-tools-"));
  const serve = startServe({ OPENAI_BASE_URL: upstream.url, OPENAI_API_KEY: "sk-upstream" }, [], cwd);
  const baseURL = `${await serve.url()}/v1`;
  return { cwd, client: new OpenAI({ baseURL, apiKey: "none", maxRetries: 0 }) };
}

const weatherChat: OpenAI.Chat.Completions.ChatCompletionTool = {
  type: "function",
  function: {
    name: "get_weather",
    description: "The weather of a city.",
    parameters: { type: "object", properties: { location: { type: "string" } }, required: ["location"] },
  },
};
const weatherResponses: OpenAI.Responses.FunctionTool = {
  type: "function",
  name: "get_weather",
  description: "The weather of a city.",
  parameters: { type: "object", properties: { location: { type: "string" } }, required: ["location"] },
  strict: false,
};

/** The tool results the upstream model was sent last, as [name, content]: each call's result once. */
function lastResults(): [string | undefined, string | null | undefined][] {
  const messages = (upstream.requests.at(-1)?.body as { messages: Wire[] } | undefined)?.messages ?? [];
  const names = new Map<string, string>();
  for (const m of messages as { tool_calls?: { id: string; function: { name: string } }[] }[])
    for (const call of m.tool_calls ?? []) names.set(call.id, call.function.name);
  return messages.filter((m) => m.role === "tool").map((m) => [names.get(m.tool_call_id ?? ""), m.content]);
}

const calculatorRan = [
  ["calculator", "42"],
  ["get_weather", "sunny, 24 degrees"],
];

type WithEvent = { agentloop?: { type: string; name?: string } };

describe("the client's own tools, with the official openai client", () => {
  it("chat completions: a tool_calls answer, the result sent back, the run's answer", async () => {
    const { client } = await setup();
    const messages: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [
      { role: "user", content: "Weather in Paris, and 6 * 7?" },
    ];
    const first = await client.chat.completions.create({
      model: "gpt-4o-mini",
      messages,
      tools: [weatherChat],
    });
    const choice = first.choices[0];
    expect(choice?.finish_reason).toBe("tool_calls");
    const calls = choice?.message.tool_calls ?? [];
    expect(
      calls.map((c) => c.type === "function" && [c.function.name, JSON.parse(c.function.arguments)]),
    ).toEqual([["get_weather", { location: "Paris" }]]);
    // The model was offered the agent's tools and the client's.
    const offered = ((upstream.requests[0]?.body.tools ?? []) as { function: { name: string } }[]).map(
      (t) => t.function.name,
    );
    expect(offered).toContain("calculator");
    expect(offered.at(-1)).toBe("get_weather");

    messages.push(choice?.message as OpenAI.Chat.Completions.ChatCompletionMessageParam);
    messages.push({ role: "tool", tool_call_id: calls[0]?.id as string, content: "sunny, 24 degrees" });
    const second = await client.chat.completions.create({
      model: "gpt-4o-mini",
      messages,
      tools: [weatherChat],
    });
    expect(second.id).toBe(first.id);
    expect(second.choices[0]?.finish_reason).toBe("stop");
    expect(second.choices[0]?.message.content).toContain("Sunny in Paris, and 6 * 7 = 42.");
    // The same run went on: the calculator's result (run once, in the first request) and the client's.
    expect(lastResults()).toEqual(calculatorRan);
    expect(upstream.requests).toHaveLength(2);
  });

  it("chat completions, streamed: the call in delta.tool_calls, the agent's own tool run once", async () => {
    const { client } = await setup();
    const messages: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [
      { role: "user", content: "Weather in Paris, and 6 * 7?" },
    ];
    const calculatorResults = (chunks: WithEvent[]) =>
      chunks.filter((c) => c.agentloop?.type === "tool_result" && c.agentloop.name === "calculator").length;
    const first = await client.chat.completions.create({
      model: "gpt-4o-mini",
      messages,
      tools: [weatherChat],
      stream: true,
    });
    const chunks: (OpenAI.Chat.Completions.ChatCompletionChunk & WithEvent)[] = [];
    for await (const chunk of first) chunks.push(chunk);
    const deltas = chunks.flatMap((c) => c.choices[0]?.delta.tool_calls ?? []);
    expect(deltas.map((d) => d.function?.name)).toEqual(["get_weather"]);
    expect(chunks.map((c) => c.choices[0]?.finish_reason).filter(Boolean)).toEqual(["tool_calls"]);
    expect(calculatorResults(chunks)).toBe(1);
    const text = chunks.map((c) => c.choices[0]?.delta.content ?? "").join("");

    const id = deltas[0]?.id as string;
    messages.push({
      role: "assistant",
      content: text,
      tool_calls: [
        { id, type: "function", function: { name: "get_weather", arguments: '{"location":"Paris"}' } },
      ],
    });
    messages.push({ role: "tool", tool_call_id: id, content: "sunny, 24 degrees" });
    const second = await client.chat.completions.create({
      model: "gpt-4o-mini",
      messages,
      tools: [weatherChat],
      stream: true,
    });
    const rest: (OpenAI.Chat.Completions.ChatCompletionChunk & WithEvent)[] = [];
    for await (const chunk of second) rest.push(chunk);
    expect(rest.map((c) => c.choices[0]?.delta.content ?? "").join("")).toContain("Sunny in Paris");
    expect(rest.at(-1)?.choices[0]?.finish_reason).toBe("stop");
    expect(calculatorResults(rest)).toBe(0);
    expect(lastResults()).toEqual(calculatorRan);
  });

  it("responses: a function_call item, its function_call_output by previous_response_id, the answer", async () => {
    const { client } = await setup();
    const first = await client.responses.create({
      model: "gpt-4o-mini",
      input: "Weather in Paris, and 6 * 7?",
      tools: [weatherResponses],
      tool_choice: { type: "function", name: "get_weather" },
    });
    expect(first.status).toBe("completed");
    // tool_choice reached the model, for the client's tool.
    expect(upstream.requests[0]?.body.tool_choice).toEqual({
      type: "function",
      function: { name: "get_weather" },
    });
    const call = first.output.find((item) => item.type === "function_call");
    expect(call).toMatchObject({
      type: "function_call",
      name: "get_weather",
      arguments: '{"location":"Paris"}',
    });
    expect(first.tools).toMatchObject([{ type: "function", name: "get_weather" }]);

    const second = await client.responses.create({
      model: "gpt-4o-mini",
      previous_response_id: first.id,
      input: [
        {
          type: "function_call_output",
          call_id: (call as { call_id: string }).call_id,
          output: "sunny, 24 degrees",
        },
      ],
    });
    expect(second.status).toBe("completed");
    expect(second.output_text).toContain("Sunny in Paris, and 6 * 7 = 42.");
    expect(lastResults()).toEqual(calculatorRan);
    // Without the tools in the second request, the run still knew them; the upstream was not asked again for the first reply.
    expect(upstream.requests).toHaveLength(2);
  });

  it("responses, streamed: function_call events, then the whole input sent back (no previous_response_id)", async () => {
    const { client } = await setup();
    const input: OpenAI.Responses.ResponseInputItem[] = [
      { type: "message", role: "user", content: "Weather in Paris, and 6 * 7?" },
    ];
    const stream = await client.responses.create({
      model: "gpt-4o-mini",
      input,
      tools: [weatherResponses],
      stream: true,
    });
    const events: OpenAI.Responses.ResponseStreamEvent[] = [];
    for await (const event of stream) events.push(event);
    const types = events.map((e) => e.type);
    expect(types).toContain("response.function_call_arguments.done");
    const done = events.find((e) => e.type === "response.completed");
    const call =
      done?.type === "response.completed"
        ? done.response.output.find((i) => i.type === "function_call")
        : undefined;
    expect(call?.type === "function_call" && call.name).toBe("get_weather");
    if (call?.type !== "function_call") throw new Error("no call");

    input.push({ type: "function_call", call_id: call.call_id, name: call.name, arguments: call.arguments });
    input.push({ type: "function_call_output", call_id: call.call_id, output: "sunny, 24 degrees" });
    const next = await client.responses.create({
      model: "gpt-4o-mini",
      input,
      tools: [weatherResponses],
      stream: true,
    });
    let text = "";
    for await (const event of next) if (event.type === "response.output_text.delta") text += event.delta;
    expect(text).toContain("Sunny in Paris");
    expect(lastResults()).toEqual(calculatorRan);
  });

  it("applies tool_choice none and parallel_tool_calls to the client's tools; without tools nothing changes", async () => {
    const { client } = await setup();
    const none = await client.chat.completions.create({
      model: "gpt-4o-mini",
      messages: [{ role: "user", content: "hi" }],
      tools: [weatherChat],
      tool_choice: "none",
    });
    expect(none.choices[0]?.message.content).toBe("No tools here.");
    const plain = await client.chat.completions.create({
      model: "gpt-4o-mini",
      messages: [{ role: "user", content: "hi" }],
    });
    expect(plain.choices[0]?.finish_reason).toBe("stop");
    const [withNone, withoutTools] = upstream.requests.map((r) => r.body);
    expect(withNone.tools).toEqual(withoutTools.tools);
    expect(withoutTools.tool_choice).toBeUndefined();
    expect(withoutTools.parallel_tool_calls).toBeUndefined();

    await client.chat.completions.create({
      model: "gpt-4o-mini",
      messages: [{ role: "user", content: "weather?" }],
      tools: [weatherChat],
      parallel_tool_calls: false,
    });
    expect(upstream.requests[2]?.body.parallel_tool_calls).toBe(false);
  });

  it("continues the run on another replica sharing the store", async () => {
    const { client, cwd } = await setup();
    const other = startServe({ OPENAI_BASE_URL: upstream.url, OPENAI_API_KEY: "sk-upstream" }, [], cwd);
    const second = new OpenAI({ baseURL: `${await other.url()}/v1`, apiKey: "none", maxRetries: 0 });
    const first = await client.responses.create({
      model: "gpt-4o-mini",
      input: "Weather in Paris, and 6 * 7?",
      tools: [weatherResponses],
    });
    const call = first.output.find((item) => item.type === "function_call");
    const next = await second.responses.create({
      model: "gpt-4o-mini",
      previous_response_id: first.id,
      input: [
        {
          type: "function_call_output",
          call_id: (call as { call_id: string }).call_id,
          output: "sunny, 24 degrees",
        },
      ],
    });
    expect(next.output_text).toContain("Sunny in Paris");
    expect(lastResults()).toEqual(calculatorRan);
  });

  it("answers bad tools and bad results with a 400 naming the fix, and a finished run with a 409", async () => {
    const { client } = await setup();
    const clash = client.chat.completions.create({
      model: "gpt-4o-mini",
      messages: [{ role: "user", content: "hi" }],
      tools: [{ type: "function", function: { name: "calculator", parameters: {} } }],
    });
    await expect(clash).rejects.toMatchObject({
      status: 400,
      message: expect.stringMatching(/one of the agent's own tools/),
    });

    const first = await client.chat.completions.create({
      model: "gpt-4o-mini",
      messages: [{ role: "user", content: "Weather?" }],
      tools: [weatherChat],
    });
    const id = first.choices[0]?.message.tool_calls?.[0]?.id as string;
    const stranger = client.chat.completions.create({
      model: "gpt-4o-mini",
      messages: [
        { role: "user", content: "Weather?" },
        { role: "tool", tool_call_id: "call_from_elsewhere", content: "?" },
      ],
    });
    await expect(stranger).rejects.toMatchObject({
      status: 400,
      message: expect.stringMatching(/is not the id of a call/),
    });
    const answer = (content: string) =>
      client.chat.completions.create({
        model: "gpt-4o-mini",
        messages: [
          { role: "user", content: "Weather?" },
          { role: "tool", tool_call_id: id, content },
        ],
      });
    // Ids OpenAI would take too (at most 40 characters).
    expect(id).toMatch(/^call_[A-Za-z0-9_-]{1,35}$/);
    const wrongPlace = client.chat.completions.create({
      model: "gpt-4o-mini",
      messages: [
        { role: "user", content: "Weather?" },
        { role: "tool", tool_call_id: id.replace(/_\d+$/, "_7"), content: "?" },
      ],
    });
    await expect(wrongPlace).rejects.toMatchObject({
      status: 400,
      message: expect.stringMatching(/no call .* waits/),
    });
    expect((await answer("rain")).choices[0]?.finish_reason).toBe("stop");
    await expect(answer("rain again")).rejects.toMatchObject({ status: 409 });
  });
});
