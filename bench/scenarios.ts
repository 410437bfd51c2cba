// The suite's scenarios beyond per-iteration overhead: HTTP end to end, parallel tools,
// concurrent sessions, and the server's requests per second.
import type { AddressInfo } from "node:net";
import { createOpenAI } from "@ai-sdk/openai";
import { serve } from "@hono/node-server";
import { tool as lcTool } from "@langchain/core/tools";
import { createReactAgent } from "@langchain/langgraph/prebuilt";
import { ChatOpenAI } from "@langchain/openai";
import {
  Agent as AgentsSdkAgent,
  run as agentsRun,
  tool as agentsTool,
  OpenAIChatCompletionsModel,
  setTracingDisabled,
} from "@openai/agents";
import { tool as aiTool, generateText, isStepCount } from "ai";
import autocannon from "autocannon";
import OpenAI from "openai";
import { z } from "zod";
import { Agent, defineTool } from "../dist/index.js";
import { openAIChatModel } from "../dist/models/openai-chat.js";
import { createApp } from "../dist/server/index.js";
import { startFakeOpenAIServer } from "../dist/testing/index.js";

const schema = z.object({ a: z.number(), b: z.number() });
const addTool = () =>
  defineTool({
    name: "add",
    description: "Adds two numbers.",
    parameters: schema,
    execute: ({ a, b }) => a + b,
  });

/** Every framework's OpenAI client stack against one local streaming fake server, N iterations. */
export async function httpEndToEnd(n: number): Promise<string> {
  const server = await startFakeOpenAIServer({
    respond: (request) => {
      const turns = request.body.messages.filter((m: { role: string }) => m.role === "tool").length;
      return turns < n ? { toolCalls: [{ name: "add", arguments: { a: 1, b: 2 } }] } : { text: "done" };
    },
  });
  const key = "sk-bench";
  setTracingDisabled(true); // no exporter reaching for api.openai.com
  const runners: Record<string, () => Promise<unknown>> = {
    agentloop: () =>
      new Agent({
        model: openAIChatModel({ model: "gpt-4o-mini", baseURL: server.url, apiKey: key }),
        tools: [addTool()],
        maxIterations: n + 1,
        repetitionThreshold: 1e9,
      }).run("go"),
    "Vercel AI SDK": () =>
      generateText({
        model: createOpenAI({ baseURL: server.url, apiKey: key }).chat("gpt-4o-mini"),
        tools: {
          add: aiTool({
            description: "Adds two numbers.",
            inputSchema: schema,
            execute: async ({ a, b }) => a + b,
          }),
        },
        stopWhen: isStepCount(n + 1),
        prompt: "go",
      }),
    "OpenAI Agents SDK": () =>
      agentsRun(
        new AgentsSdkAgent({
          name: "bench",
          instructions: "Add.",
          model: new OpenAIChatCompletionsModel(
            new OpenAI({ baseURL: server.url, apiKey: key }),
            "gpt-4o-mini",
          ),
          tools: [
            agentsTool({
              name: "add",
              description: "Adds two numbers.",
              parameters: schema,
              execute: async ({ a, b }) => a + b,
            }),
          ],
        }),
        "go",
        { maxTurns: n + 2 },
      ),
    LangGraph: () =>
      createReactAgent({
        llm: new ChatOpenAI({ model: "gpt-4o-mini", apiKey: key, configuration: { baseURL: server.url } }),
        tools: [
          lcTool(async ({ a, b }: { a: number; b: number }) => String(a + b), {
            name: "add",
            description: "Adds two numbers.",
            schema,
          }),
        ],
      }).invoke({ messages: [{ role: "user", content: "go" }] }, { recursionLimit: 2 * n + 10 }),
  };
  const rows: string[] = [];
  for (const [name, run] of Object.entries(runners)) {
    try {
      await run(); // warm-up
      const started = performance.now();
      await run();
      rows.push(`| ${name} | ${(((performance.now() - started) * 1000) / n).toFixed(0)} |`);
    } catch (error) {
      rows.push(`| ${name} | failed: ${(error as Error).message.split("\n")[0]} |`);
    }
  }
  await server.close();
  return `### End to end over HTTP (µs per iteration, N = ${n}, same local fake server; includes the fake server's own work; LangChain's ChatOpenAI sends non-streaming requests, since its streaming path fetches a tokenizer from the internet)\n\n| framework | µs/iteration |\n| --- | ---: |\n${rows.join("\n")}`;
}

/** Four tools of 50 ms each in one iteration take about as long as the slowest. */
export async function parallelTools(): Promise<string> {
  const slow = (name: string) =>
    defineTool({
      name,
      description: "Waits 50 ms.",
      parameters: z.object({}),
      execute: () => new Promise((r) => setTimeout(() => r("ok"), 50)),
    });
  const tools = ["a", "b", "c", "d"].map(slow);
  let calls = 0;
  const model = {
    id: "fake",
    async *stream() {
      const usage = { inputTokens: 0, outputTokens: 0 };
      yield calls++ === 0
        ? {
            type: "done" as const,
            message: {
              content: "",
              toolCalls: tools.map((t, i) => ({ id: `c${i}`, name: t.name, arguments: "{}" })),
              finishReason: "tool_calls",
              usage,
            },
          }
        : { type: "done" as const, message: { content: "done", toolCalls: [], finishReason: "stop", usage } };
    },
  };
  const started = performance.now();
  await new Agent({ model, tools }).run("go");
  const ms = performance.now() - started;
  return `### Parallel tools\n\nFour tools of 50 ms each in one iteration: **${ms.toFixed(0)} ms** for the run (sequential would be 200 ms; target: near the slowest call, 50 ms).`;
}

/** Sessions in one process, each with a model that takes 50 ms per call and two iterations. */
export async function concurrency(sizes: number[]): Promise<string> {
  const rows: string[] = [];
  for (const sessions of sizes) {
    const model = {
      id: "fake",
      async *stream(request: { messages: readonly { role: string }[] }) {
        await new Promise((r) => setTimeout(r, 50));
        const usage = { inputTokens: 0, outputTokens: 0 };
        const done = request.messages.some((m) => m.role === "tool");
        yield done
          ? {
              type: "done" as const,
              message: { content: "done", toolCalls: [], finishReason: "stop", usage },
            }
          : {
              type: "done" as const,
              message: {
                content: "",
                toolCalls: [{ id: "c", name: "add", arguments: '{"a":1,"b":2}' }],
                finishReason: "tool_calls",
                usage,
              },
            };
      },
    };
    const agent = new Agent({ model, tools: [addTool()] });
    (globalThis as { gc?: () => void }).gc?.();
    const heapBefore = process.memoryUsage().heapUsed;
    let heapPeak = heapBefore;
    const timer = setInterval(() => {
      heapPeak = Math.max(heapPeak, process.memoryUsage().heapUsed);
    }, 10);
    const started = performance.now();
    const added = await Promise.all(
      Array.from({ length: sessions }, async () => {
        const t = performance.now();
        await agent.run("go");
        return performance.now() - t - 100; // two model calls of 50 ms
      }),
    );
    const elapsed = performance.now() - started;
    clearInterval(timer);
    added.sort((a, b) => a - b);
    const pct = (p: number) => added[Math.min(added.length - 1, Math.floor(p * added.length))] ?? 0;
    rows.push(
      `| ${sessions.toLocaleString("en")} | ${((sessions / elapsed) * 1000).toFixed(0)} runs/s | ${pct(0.5).toFixed(1)} | ${pct(0.99).toFixed(1)} | ${((heapPeak - heapBefore) / sessions / 1024).toFixed(1)} |`,
    );
  }
  return `### Concurrent sessions (model takes 50 ms per call, 2 calls per run, one process)\n\n| sessions | throughput | p50 added latency (ms) | p99 added latency (ms) | peak heap per session (KiB) |\n| ---: | ---: | ---: | ---: | ---: |\n${rows.join("\n")}`;
}

/** `agentloop serve`'s app on loopback under autocannon: non-streaming chat completions. */
export async function serverRps(seconds: number): Promise<string> {
  const model = {
    id: "fake",
    async *stream() {
      yield {
        type: "done" as const,
        message: {
          content: "hello",
          toolCalls: [],
          finishReason: "stop",
          usage: { inputTokens: 1, outputTokens: 1 },
        },
      };
    },
  };
  const app = createApp({ agents: { bench: new Agent({ model }) } }).app;
  const http = await new Promise<ReturnType<typeof serve>>((resolve) => {
    const s = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }, () => resolve(s));
  });
  const { port } = http.address() as AddressInfo;
  const result = await autocannon({
    url: `http://127.0.0.1:${port}/v1/chat/completions`,
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ messages: [{ role: "user", content: "hi" }] }),
    connections: 50,
    duration: seconds,
  });
  await new Promise((resolve) => http.close(resolve));
  return `### Server on loopback (autocannon, 50 connections, ${seconds} s, non-streaming, zero-latency model)\n\n${result.requests.average.toFixed(0)} requests/s on average, latency p50 ${result.latency.p50} ms, p99 ${result.latency.p99} ms, ${result.non2xx} non-2xx.`;
}
