/**
 * Tool arguments nested thousands of levels deep (which overflow the stack of anything recursive,
 * `JSON.stringify` included) become an error result the model reads, never a crash: through the
 * library (native OpenAI and Anthropic tool calls, Ollama-style object arguments, the xml
 * protocol) and through `agentloop run --json`.
 */
import { afterEach, describe, expect, it } from "vitest";
import { Agent } from "../src/agent/agent.js";
import type { AgentEvent } from "../src/core/events.js";
import { anthropicModel } from "../src/models/anthropic.js";
import { openAIChatModel } from "../src/models/openai-chat.js";
import { createApp } from "../src/server/index.js";
import { startFakeAnthropicServer } from "../src/testing/fake-anthropic-server.js";
import { type FakeOpenAIServer, startFakeOpenAIServer } from "../src/testing/fake-openai-server.js";
import { defineTool } from "../src/tools/tool.js";
import { runCli } from "./helpers.js";

/** `{"x":{"x":...1}}`: an object nested `depth` levels deep. */
const deep = (depth: number) => `${'{"x":'.repeat(depth)}1${"}".repeat(depth)}`;
const TOO_DEEP = "The arguments of 'nest' are nested deeper than 64 levels: send flatter arguments.";
/** A tool that takes any arguments. */
const nest = defineTool({
  name: "nest",
  description: "Takes anything.",
  parameters: { type: "object" },
  execute: () => "ran",
});

let servers: { close(): Promise<void> }[] = [];
afterEach(async () => {
  await Promise.all(servers.map((s) => s.close()));
  servers = [];
});
async function openai(
  respond: Parameters<typeof startFakeOpenAIServer>[0]["respond"],
): Promise<FakeOpenAIServer> {
  const s = await startFakeOpenAIServer({ respond });
  servers.push(s);
  return s;
}

async function events(agent: Agent): Promise<AgentEvent[]> {
  const out: AgentEvent[] = [];
  for await (const e of agent.stream("go")) out.push(e);
  return out;
}

/** The run recovered: an error result for the deep call, then the final answer; every event serialises. */
function expectRecovered(all: AgentEvent[], id?: string) {
  const call = all.find((e) => e.type === "tool_call");
  expect(call).toMatchObject({ type: "tool_call", name: "nest", arguments: {} });
  if (id) expect(call).toMatchObject({ id });
  expect(all.find((e) => e.type === "tool_result")).toMatchObject({ isError: true, content: TOO_DEEP });
  expect(all.at(-1)).toMatchObject({ type: "turn_complete", stopReason: "final_answer", output: "Done." });
  expect(() => all.map((e) => JSON.stringify(e))).not.toThrow();
}

describe("tool arguments nested too deep", () => {
  it("native OpenAI: 5,000 levels become an error result, and the run goes on", async () => {
    const s = await openai([
      { toolCalls: [{ id: "call_deep", name: "nest", arguments: deep(5000) }] },
      { text: "Done." },
    ]);
    const model = openAIChatModel({ model: "gpt-4o-mini", apiKey: "sk-test", baseURL: s.url, maxRetries: 0 });
    const all = await events(new Agent({ model, tools: [nest] }));
    expectRecovered(all, "call_deep");
    expect(s.requests[1]?.body.messages.at(-1)).toMatchObject({ role: "tool", content: TOO_DEEP });
  });

  it("64 levels are still arguments; 65 are not", async () => {
    const s = await openai([
      { toolCalls: [{ name: "nest", arguments: deep(64) }] },
      { toolCalls: [{ name: "nest", arguments: deep(65) }] },
      { text: "Done." },
    ]);
    const model = openAIChatModel({ model: "gpt-4o-mini", apiKey: "sk-test", baseURL: s.url, maxRetries: 0 });
    const all = await events(new Agent({ model, tools: [nest] }));
    const results = all.flatMap((e) => (e.type === "tool_result" ? [e.content] : []));
    expect(results).toEqual(["ran", TOO_DEEP]);
  });

  it("Ollama-style object arguments 5,000 levels deep", async () => {
    const chunk = (delta: string, finish = "null") =>
      `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":${delta},"finish_reason":${finish}}]}\n\n`;
    const raw = `${chunk(`{"role":"assistant","tool_calls":[{"function":{"name":"nest","arguments":${deep(5000)}}}]}`)}${chunk("{}", '"tool_calls"')}data: [DONE]\n\n`;
    const s = await openai([{ raw }, { text: "Done." }]);
    const model = openAIChatModel({ model: "llama3", apiKey: "sk-test", baseURL: s.url, maxRetries: 0 });
    expectRecovered(await events(new Agent({ model, tools: [nest] })));
  });

  it("native Anthropic: the deep input is never sent back", async () => {
    const s = await startFakeAnthropicServer({
      respond: [{ toolCalls: [{ id: "toolu_deep", name: "nest", input: deep(5000) }] }, { text: "Done." }],
    });
    servers.push(s);
    const model = anthropicModel({
      model: "claude-haiku-4-5",
      apiKey: "sk-ant-test",
      baseURL: s.url,
      maxRetries: 0,
    });
    expectRecovered(await events(new Agent({ model, tools: [nest] })), "toolu_deep");
    const sent = s.requests[1]?.body.messages;
    expect(sent[1].content).toEqual([{ type: "tool_use", id: "toolu_deep", name: "nest", input: {} }]);
    expect(sent[2].content[0]).toMatchObject({ type: "tool_result", is_error: true, content: TOO_DEEP });
  });

  it("xml protocol: a <tool> block 10,000 levels deep is an error result, not a model_error", async () => {
    const block = `<tool>{"server_name":"local","tool_name":"nest","arguments":${deep(10_000)}}</tool>`;
    const s = await openai([{ text: `Let me compute. ${block}` }, { text: "Done." }]);
    const model = openAIChatModel({ model: "gpt-4o-mini", apiKey: "sk-test", baseURL: s.url, maxRetries: 0 });
    const all = await events(new Agent({ model, tools: [nest], toolProtocol: "xml" }));
    expectRecovered(all);
    expect(s.requests[1]?.body.messages.at(-1).content).toContain(`Tool 'nest' error:\n${TOO_DEEP}`);
  });

  it("agentloop run --json: 5,000 levels end in turn_complete with exit 0", async () => {
    const s = await openai([{ toolCalls: [{ name: "nest", arguments: deep(5000) }] }, { text: "Done." }]);
    const run = await runCli(["run", "--json", "go"], {
      env: { OPENAI_BASE_URL: s.url, OPENAI_API_KEY: "sk-test" },
    });
    expect(run.code).toBe(0);
    const lines = run.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as AgentEvent);
    expect(lines.find((e) => e.type === "tool_result")).toMatchObject({ isError: true, content: TOO_DEEP });
    expect(lines.at(-1)).toMatchObject({
      type: "turn_complete",
      stopReason: "final_answer",
      output: "Done.",
    });
  });

  it("the server streams the run to its end: an error result, the answer, turn_complete, [DONE]", async () => {
    const s = await openai([{ toolCalls: [{ name: "nest", arguments: deep(5000) }] }, { text: "Done." }]);
    const model = openAIChatModel({ model: "gpt-4o-mini", apiKey: "sk-test", baseURL: s.url, maxRetries: 0 });
    const { app } = createApp({ agents: { deep: new Agent({ model, tools: [nest] }) } });
    const res = await app.fetch(
      new Request("http://127.0.0.1/v1/chat/completions", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ stream: true, messages: [{ role: "user", content: "go" }] }),
      }),
    );
    const text = await res.text();
    expect(text.endsWith("data: [DONE]\n\n")).toBe(true);
    const events = [...text.matchAll(/^data: (\{.*)$/gm)].flatMap((m) => {
      const event = (JSON.parse(m[1] as string) as { agentloop?: AgentEvent }).agentloop;
      return event ? [event] : [];
    });
    expect(events.find((e) => e.type === "tool_result")).toMatchObject({ isError: true, content: TOO_DEEP });
    expect(events.at(-1)).toMatchObject({
      type: "turn_complete",
      stopReason: "final_answer",
      output: "Done.",
    });
  });
});
