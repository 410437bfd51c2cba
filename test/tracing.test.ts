// Traces end to end (SPEC section 11): the built `agentloop run` and `agentloop serve` export to a
// real OTLP/HTTP receiver of this test's own (test/support/otlp-receiver.ts), which decodes what the
// official exporters send, protobuf and JSON. The model is the fake OpenAI server.
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import {
  type FakeOpenAIServer,
  type FakeResponse,
  startFakeOpenAIServer,
} from "../src/testing/fake-openai-server.js";
import { CLI, runCli, until } from "./helpers.js";
import { type OtlpReceiver, type ReceivedSpan, startOtlpReceiver } from "./support/otlp-receiver.js";
import { startServe } from "./support/serve-process.js";

const root = mkdtempSync(join(tmpdir(), "agentloop-tracing-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

let receiver: OtlpReceiver | undefined;
let model: FakeOpenAIServer | undefined;
const children: ChildProcess[] = [];
afterEach(async () => {
  for (const child of children.splice(0)) if (child.exitCode === null) child.kill("SIGKILL");
  await receiver?.close();
  await model?.close();
  receiver = model = undefined;
});

const CALCULATION: FakeResponse[] = [
  { toolCalls: [{ id: "call_calc", name: "calculator", arguments: { expression: "2+2" } }] },
  { text: "2+2 is 4." },
];

async function setup(respond: FakeResponse[] | ((index: number) => FakeResponse) = CALCULATION) {
  receiver = await startOtlpReceiver();
  model = await startFakeOpenAIServer({
    respond: typeof respond === "function" ? (_request, index) => respond(index) : respond,
  });
  const env = {
    OPENAI_API_KEY: "sk-test",
    OPENAI_BASE_URL: model.url,
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
  };
  return { receiver, model, env };
}

const byName = (spans: ReceivedSpan[], name: string) => spans.filter((s) => s.name === name);
function only(spans: ReceivedSpan[], name: string): ReceivedSpan {
  const found = byName(spans, name);
  expect(found, name).toHaveLength(1);
  return found[0] as ReceivedSpan;
}

const lastEvent = (stdout: string) =>
  JSON.parse(stdout.trim().split("\n").at(-1) as string) as Record<string, unknown>;

describe("agentloop run exports its trace over OTLP/HTTP", () => {
  for (const protocol of ["http/protobuf", "http/json"] as const) {
    it(`${protocol}: the span tree, the conventions' attributes, the resource, turn_complete.traceId; the headers reach the collector and no output`, async () => {
      const { receiver, model, env } = await setup();
      const run = await runCli(["run", "--json", "--model", "gpt-4o-mini", "What is 2+2?"], {
        cwd: root,
        env: {
          ...env,
          OTEL_EXPORTER_OTLP_PROTOCOL: protocol,
          OTEL_EXPORTER_OTLP_HEADERS: "x-honeycomb-team=hc-secret-key%21,x-other=1",
        },
      });
      expect(run.stderr).toBe("");
      expect(run.code).toBe(0);
      const done = lastEvent(run.stdout);
      expect(done).toMatchObject({ type: "turn_complete", stopReason: "final_answer", output: "2+2 is 4." });
      expect(
        receiver.requests.every((r) =>
          r.contentType.startsWith(protocol === "http/json" ? "application/json" : "application/x-protobuf"),
        ),
      ).toBe(true);
      expect(receiver.requests[0]?.headers["x-honeycomb-team"]).toBe("hc-secret-key!");
      expect(run.stdout + run.stderr).not.toContain("hc-secret-key");

      const spans = receiver.spans;
      expect(spans).toHaveLength(4);
      const agent = only(spans, "invoke_agent agentloop");
      expect(agent.traceId).toBe(done.traceId);
      expect(agent.parentSpanId).toBe("");
      expect(agent.kind).toBe(1);
      expect(agent.scope).toBe("agentloop");
      expect(agent.resource["service.name"]).toBe("agentloop");
      expect(agent.attributes).toEqual({
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "agentloop",
        "agentloop.run.id": done.runId,
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.usage.input_tokens": (done.usage as { inputTokens: number }).inputTokens,
        "gen_ai.usage.output_tokens": (done.usage as { outputTokens: number }).outputTokens,
        "agentloop.stop_reason": "final_answer",
        "agentloop.iterations": 2,
      });
      const chats = byName(spans, "chat gpt-4o-mini");
      expect(chats).toHaveLength(2);
      for (const [i, chat] of chats.entries()) {
        expect(chat.kind).toBe(3);
        expect(chat.parentSpanId).toBe(agent.spanId);
        expect(chat.traceId).toBe(agent.traceId);
        expect(chat.attributes).toEqual({
          "gen_ai.operation.name": "chat",
          "gen_ai.provider.name": "openai",
          "gen_ai.request.model": "gpt-4o-mini",
          "gen_ai.response.model": "gpt-4o-mini",
          "gen_ai.response.id": `chatcmpl-fake-${i}`,
          "gen_ai.response.finish_reasons": [i === 0 ? "tool_calls" : "stop"],
          "gen_ai.usage.input_tokens": expect.any(Number),
          "gen_ai.usage.output_tokens": expect.any(Number),
          "server.address": "127.0.0.1",
          "server.port": Number(new URL(model.url).port),
        });
      }
      const tool = only(spans, "execute_tool calculator");
      expect(tool.parentSpanId).toBe(agent.spanId);
      expect(tool.attributes).toEqual({
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "calculator",
        "gen_ai.tool.call.id": "call_calc",
        "gen_ai.tool.type": "function",
      });
      expect(spans.every((s) => s.status.code === 0)).toBe(true);
    });
  }

  it("content on with OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT; OTEL_SERVICE_NAME names the service", async () => {
    const { receiver, env } = await setup();
    const run = await runCli(["run", "What is 2+2?"], {
      cwd: root,
      env: {
        ...env,
        OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: "true",
        OTEL_SERVICE_NAME: "calc-bot",
      },
    });
    expect(run.code).toBe(0);
    expect(run.stdout).toBe("2+2 is 4.\n");
    const [first] = byName(receiver.spans, "chat gpt-4o-mini");
    expect(JSON.parse(String(first?.attributes["gen_ai.input.messages"]))).toEqual([
      { role: "user", parts: [{ type: "text", content: "What is 2+2?" }] },
    ]);
    const tool = only(receiver.spans, "execute_tool calculator");
    expect(tool.attributes["gen_ai.tool.call.arguments"]).toBe('{"expression":"2+2"}');
    expect(tool.attributes["gen_ai.tool.call.result"]).toBe("4");
    expect(first?.resource["service.name"]).toBe("calc-bot");
  });

  it("a model error: the chat span and the run are ERROR with error.type; the exit code is the run's", async () => {
    const { receiver, env } = await setup([{ status: 400, body: '{"error":{"message":"no such model"}}' }]);
    const run = await runCli(["run", "Hello"], { cwd: root, env });
    expect(run.code).toBe(5);
    const chat = only(receiver.spans, "chat gpt-4o-mini");
    expect(chat.status.code).toBe(2);
    expect(chat.attributes["error.type"]).toBe("400");
    const agent = only(receiver.spans, "invoke_agent agentloop");
    expect(agent.status.code).toBe(2);
    expect(agent.attributes["error.type"]).toBe("model_error");
  });

  it("an unreachable collector: exactly one warning line; the output and the exit code are the untraced run's", async () => {
    const { env } = await setup([...CALCULATION, ...CALCULATION]);
    const closed = await freePort();
    const plain = await runCli(["run", "What is 2+2?"], {
      cwd: root,
      env: { ...env, OTEL_EXPORTER_OTLP_ENDPOINT: "" },
    });
    const traced = await runCli(["run", "What is 2+2?"], {
      cwd: root,
      env: {
        ...env,
        OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${closed}`,
        OTEL_EXPORTER_OTLP_HEADERS: "authorization=Bearer otel-token-123",
      },
    });
    expect(plain.stderr).toBe("");
    expect(traced.code).toBe(plain.code);
    expect(traced.stdout).toBe(plain.stdout);
    const lines = traced.stderr.split("\n").filter(Boolean);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      new RegExp(
        `^agentloop: warning: traces could not be sent to http://127\\.0\\.0\\.1:${closed}/v1/traces: `,
      ),
    );
    expect(traced.stderr).not.toContain("otel-token-123");
  });

  it("settings it cannot use: one warning line naming the variable (never a header's value), and the run goes on untraced", async () => {
    const { receiver, env } = await setup([...CALCULATION, ...CALCULATION, ...CALCULATION, ...CALCULATION]);
    const cases: [Record<string, string>, RegExp][] = [
      [
        { OTEL_EXPORTER_OTLP_HEADERS: "authorization=Bearer otel-token-123,broken" },
        /OTEL_EXPORTER_OTLP_HEADERS is malformed/,
      ],
      [{ OTEL_EXPORTER_OTLP_HEADERS: "authorization=%E0%A4%A" }, /OTEL_EXPORTER_OTLP_HEADERS is malformed/],
      [
        { OTEL_EXPORTER_OTLP_ENDPOINT: "collector:4318" },
        /OTEL_EXPORTER_OTLP_ENDPOINT is not an http\(s\) URL/,
      ],
      [
        { OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" },
        /OTEL_EXPORTER_OTLP_PROTOCOL=grpc is not supported \(http\/protobuf or http\/json\)/,
      ],
    ];
    for (const [bad, message] of cases) {
      const run = await runCli(["run", "What is 2+2?"], { cwd: root, env: { ...env, ...bad } });
      expect(run.code).toBe(0);
      expect(run.stdout).toBe("2+2 is 4.\n");
      const lines = run.stderr.split("\n").filter(Boolean);
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(message);
      expect(lines[0]).toMatch(/: the run goes on untraced$/);
      expect(run.stderr).not.toContain("otel-token-123");
    }
    expect(receiver.spans).toEqual([]);
  });

  it("OTEL_TRACES_EXPORTER=none: nothing is exported, nothing said", async () => {
    const { receiver, env } = await setup();
    const run = await runCli(["run", "--json", "What is 2+2?"], {
      cwd: root,
      env: { ...env, OTEL_TRACES_EXPORTER: "none" },
    });
    expect(run.code).toBe(0);
    expect(run.stderr).toBe("");
    expect(lastEvent(run.stdout).traceId).toBeUndefined();
    expect(receiver.requests).toEqual([]);
  });

  it("a run --session killed with SIGKILL and resumed with --resume continues the same trace", async () => {
    // The second model request of the first process never answers: the process is killed waiting for it.
    const { receiver, model, env } = await setup((index) =>
      index === 0
        ? (CALCULATION[0] as FakeResponse)
        : index === 1
          ? { stall: true }
          : (CALCULATION[1] as FakeResponse),
    );
    const cwd = mkdtempSync(join(root, "kill-"));
    const traced = { ...env, OTEL_BSP_SCHEDULE_DELAY: "50" };
    const child = spawn(process.execPath, [CLI, "run", "--session", "s", "--json", "What is 2+2?"], {
      cwd,
      env: { PATH: process.env.PATH ?? "", ...traced },
      stdio: ["ignore", "pipe", "pipe"],
    });
    children.push(child);
    const exited = new Promise((resolve) => child.on("close", resolve));
    // The tool call's span is exported while the process waits for the model.
    const tool = await until(() => receiver.spans.find((s) => s.name === "execute_tool calculator"));
    await until(() => (model.requests.length >= 2 ? true : undefined));
    child.kill("SIGKILL");
    await exited;

    const resumed = await runCli(["run", "--session", "s", "--resume", "--json"], { cwd, env: traced });
    expect(resumed.code).toBe(0);
    const done = lastEvent(resumed.stdout);
    expect(done).toMatchObject({ type: "turn_complete", stopReason: "final_answer", output: "2+2 is 4." });
    expect(done.traceId).toBe(tool.traceId);
    // The resumed run's span is a child of the killed run's (which died with its process).
    const again = only(receiver.spans, "invoke_agent agentloop");
    expect(again.traceId).toBe(tool.traceId);
    expect(again.parentSpanId).toBe(tool.parentSpanId);
    expect(byName(receiver.spans, "chat gpt-4o-mini").at(-1)?.parentSpanId).toBe(again.spanId);
  });
});

describe("agentloop serve", () => {
  it("continues an incoming W3C traceparent, and flushes its spans when stopped", async () => {
    const { receiver, env } = await setup([{ text: "Hello there." }]);
    const serve = startServe({ ...env, OTEL_EXPORTER_OTLP_PROTOCOL: "http/json" }, ["--no-store"]);
    const url = await serve.url();
    const traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
    const parent = "00f067aa0ba902b7";
    const response = await fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", traceparent: `00-${traceId}-${parent}-01` },
      body: JSON.stringify({ messages: [{ role: "user", content: "Hi" }] }),
    });
    expect(response.status).toBe(200);
    const body = (await response.json()) as { choices: { message: { content: string } }[] };
    expect(body.choices[0]?.message.content).toBe("Hello there.");
    serve.child.kill("SIGTERM");
    await serve.exited;
    const agent = only(receiver.spans, "invoke_agent agentloop");
    expect(agent.traceId).toBe(traceId);
    expect(agent.parentSpanId).toBe(parent);
    expect(only(receiver.spans, "chat gpt-4o-mini").parentSpanId).toBe(agent.spanId);
  });
});

/** A port nothing listens on (taken, then given back). */
function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer();
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}
