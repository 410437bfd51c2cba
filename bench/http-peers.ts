// Every framework end to end over HTTP, on its own OpenAI client stack, against one fake Chat
// Completions upstream in a child process (bench/http-perf-upstream.ts: add({a: i, b: 2}) on turn
// i of N, then "done"). Frameworks interleaved round by round in this process (order rotating);
// µs per iteration (= per upstream request), CPU of this process and wall, median [min-max].
// (agentloop against a hand-written loop on the same `openai` client: bench/http-perf.ts.)
//
//   node bench/http-peers.ts [n=50] [rounds=5]
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { createOpenAI } from "@ai-sdk/openai";
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
import { tool as aiTool, isStepCount, streamText } from "ai";
import OpenAI from "openai";
import { Agent, defineTool } from "../dist/index.js";
import { openAIChatModel } from "../dist/models/openai-chat.js";
import { medianRange } from "./section.ts";
import { add as addNumbers, schema } from "./workload.ts";

const KEY = "sk-bench";
const MODEL = "gpt-4o-mini";

/** The section's markdown: `n` iterations a run, `rounds` rounds. */
export async function httpPeers(n: number, rounds: number): Promise<string> {
  const upstream = spawn(
    process.execPath,
    [fileURLToPath(new URL("./http-perf-upstream.ts", import.meta.url)), String(n)],
    { stdio: ["pipe", "pipe", "inherit"] },
  );
  try {
    const line = await new Promise<string>((resolve) =>
      createInterface({ input: upstream.stdout }).once("line", resolve),
    );
    const url = (JSON.parse(line) as { chat: string }).chat;
    setTracingDisabled(true); // no exporter reaching for api.openai.com
    let calls = 0;
    const add = async (args: { a: number; b: number }) => {
      calls++;
      return addNumbers(args);
    };
    const runners: Record<string, () => Promise<unknown>> = {
      agentloop: () =>
        new Agent({
          model: openAIChatModel({ model: MODEL, baseURL: url, apiKey: KEY }),
          tools: [
            defineTool({ name: "add", description: "Adds two numbers.", parameters: schema, execute: add }),
          ],
          maxIterations: n + 1,
        }).run("go"),
      "Vercel AI SDK": async () => {
        const result = streamText({
          model: createOpenAI({ baseURL: url, apiKey: KEY }).chat(MODEL),
          tools: { add: aiTool({ description: "Adds two numbers.", inputSchema: schema, execute: add }) },
          stopWhen: isStepCount(n + 1),
          prompt: "go",
        });
        for await (const _part of result.fullStream);
        return result.steps;
      },
      "OpenAI Agents SDK": async () => {
        const result = await agentsRun(
          new AgentsSdkAgent({
            name: "bench",
            instructions: "Add.",
            model: new OpenAIChatCompletionsModel(new OpenAI({ baseURL: url, apiKey: KEY }), MODEL),
            tools: [
              agentsTool({ name: "add", description: "Adds two numbers.", parameters: schema, execute: add }),
            ],
          }),
          "go",
          { maxTurns: n + 2, stream: true },
        );
        for await (const _event of result);
        await result.completed;
        return result;
      },
      "LangGraph (non-streaming)": () =>
        createReactAgent({
          llm: new ChatOpenAI({ model: MODEL, apiKey: KEY, configuration: { baseURL: url } }),
          tools: [lcTool(add, { name: "add", description: "Adds two numbers.", schema })],
        }).invoke({ messages: [{ role: "user", content: "go" }] }, { recursionLimit: 2 * n + 10 }),
    };
    const names = Object.keys(runners);
    const failed = new Map<string, string>();
    for (const name of names) {
      try {
        calls = 0;
        await runners[name]?.(); // warm-up, and a check that the run did the whole workload
        if (calls !== n) throw new Error(`ran the tool ${calls} times, not ${n}`);
      } catch (error) {
        failed.set(name, (error as Error).message.split("\n")[0] ?? "failed");
      }
    }
    const samples: Record<string, { cpu: number[]; wall: number[] }> = {};
    for (let round = 0; round < rounds; round++) {
      for (let i = 0; i < names.length; i++) {
        const name = names[(i + round) % names.length] as string;
        if (failed.has(name)) continue;
        const cpu = process.cpuUsage();
        const started = performance.now();
        await runners[name]?.();
        const wall = ((performance.now() - started) * 1000) / n;
        const used = process.cpuUsage(cpu);
        samples[name] ??= { cpu: [], wall: [] };
        samples[name].cpu.push((used.user + used.system) / n);
        samples[name].wall.push(wall);
      }
    }
    const cell = (xs: number[]) => medianRange(xs, 0);
    const rows = names.map((name) => {
      const s = samples[name];
      return s
        ? `| ${name} | ${cell(s.cpu)} | ${cell(s.wall)} |`
        : `| ${name} | failed: ${failed.get(name)} | - |`;
    });
    return `#### Every framework over HTTP (bench/http-peers.ts; N = ${n}, ${rounds} interleaved rounds, µs per iteration, median [min-max])

Each framework on its own OpenAI client stack, streaming from the upstream (LangChain's \`ChatOpenAI\`
sends non-streaming requests here: its streaming path fetches a tokenizer from the internet). CPU is
this process's (the upstream runs in its own); wall includes the upstream's work.

| framework | CPU µs | wall µs |
| --- | ---: | ---: |
${rows.join("\n")}`;
  } finally {
    upstream.stdin?.end();
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url))
  console.log(await httpPeers(Number(process.argv[2] ?? 50), Number(process.argv[3] ?? 5)));
