// Record and replay through the library (SPEC section 12): recorded against the fake servers that
// speak the real wire protocols, replayed with the servers closed, the event streams compared.
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { Agent, type AgentEvent, calculator, type Model, recorder } from "../index.js";
import { anthropicModel } from "../models/anthropic.js";
import { openAIChatModel } from "../models/openai-chat.js";
import { openAIResponsesModel } from "../models/openai-responses.js";
import { startFakeAnthropicServer } from "../testing/fake-anthropic-server.js";
import { startFakeOpenAIServer } from "../testing/fake-openai-server.js";
import { startFakeResponsesServer } from "../testing/fake-responses-server.js";
import { replayModel, replayTools } from "../testing/index.js";

const dir = () => mkdtempSync(join(tmpdir(), "agentloop-record-"));

/** The events of a run without what differs from run to run (ids, times). */
async function events(agent: Agent, input: string): Promise<unknown[]> {
  const out: unknown[] = [];
  for await (const event of agent.stream(input)) out.push(stable(event));
  return out;
}

function stable(event: AgentEvent): unknown {
  const { runId: _r, ...rest } = event as AgentEvent & Record<string, unknown>;
  for (const key of ["durationMs", "timestamp", "traceId"]) delete (rest as Record<string, unknown>)[key];
  if (rest.type === "turn_complete") {
    const { durationMs: _d, state: _s, ...kept } = rest as Record<string, unknown>;
    return kept;
  }
  return rest;
}

const script = [
  {
    text: "Let me compute.",
    toolCalls: [{ id: "c1", name: "calculator", arguments: { expression: "6*7" } }],
  },
  { text: "It is 42.", reasoning: "6 times 7" },
];

const families: {
  name: string;
  start: () => Promise<{ url: string; close(): Promise<void> }>;
  model: (url: string, stream: boolean) => Model;
}[] = [
  {
    name: "Chat Completions",
    start: () => startFakeOpenAIServer({ respond: [...script] }),
    model: (url, stream) =>
      openAIChatModel({ model: "gpt-4o-mini", baseURL: url, apiKey: "sk-live-secret-1234", stream }),
  },
  {
    name: "Responses",
    start: () => startFakeResponsesServer({ respond: [...script] }),
    model: (url, stream) =>
      openAIResponsesModel({ model: "gpt-4o-mini", baseURL: url, apiKey: "sk-live-secret-1234", stream }),
  },
  {
    name: "Anthropic",
    start: () =>
      startFakeAnthropicServer({
        respond: [
          {
            text: "Let me compute.",
            toolCalls: [{ id: "c1", name: "calculator", input: { expression: "6*7" } }],
          },
          { text: "It is 42.", thinking: "6 times 7" },
        ],
      }),
    model: (url) => anthropicModel({ model: "claude-test", baseURL: url, apiKey: "sk-ant-secret-1234" }),
  },
];

describe("record and replay", () => {
  for (const family of families) {
    for (const stream of family.name === "Anthropic" ? [true] : [true, false]) {
      it(`${family.name}${stream ? ", streamed" : ", not streamed"}: a replay with the server closed gives the recorded run's events`, async () => {
        const file = join(dir(), "run.jsonl");
        const server = await family.start();
        const live = await events(
          new Agent({ model: family.model(server.url, stream), tools: [calculator], record: file }),
          "What is 6*7?",
        );
        await server.close();
        const text = readFileSync(file, "utf8");
        const lines = text
          .trim()
          .split("\n")
          .map((l) => JSON.parse(l) as Record<string, unknown>);
        expect(lines[0]).toMatchObject({ type: "header", format: "agentloop-recording", version: 1 });
        expect(lines.map((l) => l.type)).toEqual(["header", "model", "tool", "model"]);
        expect(lines[2]).toMatchObject({
          name: "calculator",
          arguments: { expression: "6*7" },
          content: "42",
          isError: false,
        });
        // No credential reaches the file.
        expect(text).not.toContain("secret-1234");

        const replayed = await events(
          new Agent({ model: replayModel(file), tools: [calculator] }),
          "What is 6*7?",
        );
        expect(replayed).toEqual(live);
        // Tools from the recording too: no live tool at all.
        const offline = await events(
          new Agent({ model: replayModel(file), tools: replayTools(file) }),
          "What is 6*7?",
        );
        expect(offline).toEqual(live);
      });
    }
  }

  it("a changed request stops the run with replay_mismatch and a diff naming the message and field; lenient takes the recording", async () => {
    const file = join(dir(), "run.jsonl");
    const server = await startFakeOpenAIServer({ respond: [...script] });
    const model = openAIChatModel({ model: "gpt-4o-mini", baseURL: server.url, apiKey: "sk-x" });
    await new Agent({ model, tools: [calculator], record: file, instructions: "Be brief." }).run(
      "What is 6*7?",
    );
    await server.close();
    const diffs: string[] = [];
    const result = await new Agent({
      model: replayModel(file, { onMismatch: (d) => diffs.push(d) }),
      tools: [calculator],
      instructions: "Be very brief.",
    }).run("What is 6*7?");
    expect(result.stopReason).toBe("model_error");
    expect(result.error).toMatchObject({ code: "replay_mismatch" });
    expect(result.error?.message).toContain("--replay-lenient");
    expect(diffs[0]).toContain("model request 1 differs from the recording");
    expect(diffs[0]).toMatch(/messages\[0\]\.content \(message 1, system\)/);
    expect(diffs[0]).toContain("Be brief.");
    expect(diffs[0]).toContain("Be very brief.");
    const lenient = await new Agent({
      model: replayModel(file, { lenient: true }),
      tools: [calculator],
      instructions: "Be very brief.",
    }).run("What is 6*7?");
    expect(lenient.text).toBe("It is 42.");
  });

  it("a replayed tool call with other arguments is an error result naming the call, not a crash", async () => {
    const file = join(dir(), "run.jsonl");
    const server = await startFakeOpenAIServer({ respond: [...script] });
    const model = openAIChatModel({ model: "gpt-4o-mini", baseURL: server.url, apiKey: "sk-x" });
    await new Agent({ model, tools: [calculator], record: file }).run("What is 6*7?");
    await server.close();
    // The recording's tool entry, edited: the replayed call no longer matches it.
    const edited = readFileSync(file, "utf8").replace(
      '"arguments":{"expression":"6*7"}',
      '"arguments":{"expression":"6*8"}',
    );
    writeFileSync(file, edited);
    const result = await new Agent({
      model: replayModel(file, { lenient: true }),
      tools: replayTools(file),
    }).run("What is 6*7?");
    const toolMessage = result.messages.find((m) => m.role === "tool");
    expect(toolMessage).toMatchObject({ isError: true });
    expect(toolMessage?.content).toContain('No recorded result for calculator({"expression":"6*7"})');
  });

  it("a shared recorder takes configured secrets out of what it writes", async () => {
    const file = join(dir(), "run.jsonl");
    const server = await startFakeOpenAIServer({ respond: [{ text: "The token is tok-SECRET-0042." }] });
    const model = openAIChatModel({ model: "gpt-4o-mini", baseURL: server.url, apiKey: "sk-x" });
    const shared = recorder(file, { secrets: ["tok-SECRET-0042"] });
    await new Agent({ model, record: shared }).run("Say the token tok-SECRET-0042.");
    await server.close();
    const text = readFileSync(file, "utf8");
    expect(text).not.toContain("tok-SECRET-0042");
    expect(text).toContain("[REDACTED]");
  });

  it("bad recordings are one line each: not a recording, newer version, cut off mid-line", () => {
    const d = dir();
    const write = (name: string, text: string) => {
      const file = join(d, name);
      writeFileSync(file, text);
      return file;
    };
    expect(() => replayModel(write("a.txt", "hello\n"))).toThrow(/is not an agentloop recording/);
    expect(() => replayModel(write("b.jsonl", '{"type":"x"}\n'))).toThrow(/no recording header/);
    expect(() =>
      replayModel(write("c.jsonl", '{"type":"header","format":"agentloop-recording","version":9}\n')),
    ).toThrow(/format version 9, newer than this agentloop reads \(1\): upgrade/);
    expect(() =>
      replayModel(
        write("d.jsonl", '{"type":"header","format":"agentloop-recording","version":1}\n{"type":"mo'),
      ),
    ).toThrow(/cut off mid-line/);
    expect(() => replayModel(join(d, "missing.jsonl"))).toThrow(/cannot be read \(ENOENT\)/);
    expect(
      () =>
        new Agent({
          model: openAIChatModel({ model: "m", apiKey: "k" }),
          record: join(d, "no/such/dir/x.jsonl"),
        }),
    ).toThrow(/Cannot write the recording .* \(ENOENT\)/);
  });
});
