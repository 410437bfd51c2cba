// One workload, every framework: the model asks for add({a: 1, b: 2}) on each of N turns, then
// answers "done"; the tool adds. Each runner returns the number of model calls it made.

import { BaseChatModel } from "@langchain/core/language_models/chat_models";
import { AIMessage } from "@langchain/core/messages";
import { tool as lcTool } from "@langchain/core/tools";
import { createReactAgent } from "@langchain/langgraph/prebuilt";
import {
  Agent as AgentsSdkAgent,
  run as agentsRun,
  tool as agentsTool,
  setTracingDisabled,
  Usage,
} from "@openai/agents";
import { tool as aiTool, generateText, isStepCount, streamText } from "ai";
import { MockLanguageModelV4 } from "ai/test";
import { z } from "zod";
import { Agent, defineTool } from "../dist/index.js";

/**
 * A framework set up once for N iterations (agent, tools and fake model built outside the timed
 * part); each call of the returned function is one run. A run resolves to the framework's own
 * result (kept alive by the heap measurement).
 */
export type Runner = (n: number, streaming: boolean) => () => Promise<unknown>;

const ARGS = '{"a":1,"b":2}';
setTracingDisabled(true); // the Agents SDK would otherwise trace every run

/** The floor: a hand-written async loop (await the model, parse the arguments, await the tool). */
export const handWritten: Runner = (n) => {
  const model = async (turn: number) =>
    turn < n ? { toolCall: { id: `c${turn}`, name: "add", arguments: ARGS } } : { text: "done" };
  const tools: Record<string, (args: { a: number; b: number }) => Promise<number>> = {
    add: async ({ a, b }) => a + b,
  };
  return async () => {
    const messages: { role: string; content: string; id?: string }[] = [{ role: "user", content: "go" }];
    for (let turn = 0; ; turn++) {
      const reply = await model(turn);
      if (!reply.toolCall) return messages.push({ role: "assistant", content: reply.text ?? "" }) && messages;
      const { id, name, arguments: args } = reply.toolCall;
      messages.push({ role: "assistant", content: "", id });
      messages.push({ role: "tool", content: String(await tools[name]?.(JSON.parse(args))), id });
    }
  };
};

/** agentloop, with a zero-latency model behind its adapter interface. */
export const agentloop: Runner = (n, streaming) => {
  let calls = 0;
  const usage = { inputTokens: 1, outputTokens: 1 };
  const model = {
    id: "fake",
    async *stream() {
      const turn = calls++;
      if (streaming) yield { type: "text_delta" as const, text: "ok" };
      yield turn < n
        ? {
            type: "done" as const,
            message: {
              content: "",
              toolCalls: [{ id: `c${turn}`, name: "add", arguments: ARGS }],
              finishReason: "tool_calls",
              usage,
            },
          }
        : { type: "done" as const, message: { content: "done", toolCalls: [], finishReason: "stop", usage } };
    },
  };
  const add = defineTool({
    name: "add",
    description: "Adds two numbers.",
    parameters: z.object({ a: z.number(), b: z.number() }),
    execute: ({ a, b }) => a + b,
  });
  const agent = new Agent({
    model,
    tools: [add],
    maxIterations: n + 1,
    repetitionThreshold: Number.MAX_SAFE_INTEGER,
  });
  return async () => {
    calls = 0;
    const run = agent.stream("go");
    for await (const _event of run);
    const result = await run.result;
    if (result.stopReason !== "final_answer") throw new Error(`agentloop stopped with ${result.stopReason}`);
    return result;
  };
};

const aiUsage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 1, text: 1, reasoning: 0 },
};

/** The Vercel AI SDK: generateText / streamText with its mock model. */
export const vercelAi: Runner = (n, streaming) => {
  let calls = 0;
  const part = () => {
    const turn = calls++;
    return turn < n
      ? { type: "tool-call" as const, toolCallId: `c${turn}`, toolName: "add", input: ARGS }
      : { type: "text" as const, text: "done" };
  };
  const model = new MockLanguageModelV4({
    doGenerate: async () => {
      const content = part();
      const finishReason = {
        unified: content.type === "text" ? ("stop" as const) : ("tool-calls" as const),
        raw: undefined,
      };
      return { content: [content], finishReason, usage: aiUsage, warnings: [] };
    },
    doStream: async () => {
      const content = part();
      const chunks =
        content.type === "text"
          ? [
              { type: "text-start" as const, id: "t" },
              { type: "text-delta" as const, id: "t", delta: "done" },
              { type: "text-end" as const, id: "t" },
            ]
          : [content];
      const finishReason = {
        unified: content.type === "text" ? ("stop" as const) : ("tool-calls" as const),
        raw: undefined,
      };
      const stream = new ReadableStream({
        start(controller) {
          for (const chunk of chunks) controller.enqueue(chunk);
          controller.enqueue({ type: "finish", finishReason, usage: aiUsage });
          controller.close();
        },
      });
      return { stream };
    },
  });
  const tools = {
    add: aiTool({
      description: "Adds two numbers.",
      inputSchema: z.object({ a: z.number(), b: z.number() }),
      execute: async ({ a, b }) => a + b,
    }),
  };
  return async () => {
    calls = 0;
    if (!streaming) return generateText({ model, tools, stopWhen: isStepCount(n + 1), prompt: "go" });
    const result = streamText({ model, tools, stopWhen: isStepCount(n + 1), prompt: "go" });
    for await (const _ of result.fullStream) {
      // consume
    }
    return result.steps;
  };
};

/** The OpenAI Agents SDK with a fake `Model`. */
export const openaiAgents: Runner = (n, streaming) => {
  let calls = 0;
  const response = () => {
    const turn = calls++;
    const output =
      turn < n
        ? [
            {
              type: "function_call" as const,
              callId: `c${turn}`,
              name: "add",
              arguments: ARGS,
              status: "completed" as const,
            },
          ]
        : [
            {
              type: "message" as const,
              role: "assistant" as const,
              status: "completed" as const,
              content: [{ type: "output_text" as const, text: "done" }],
            },
          ];
    return { id: `r${turn}`, output };
  };
  const model = {
    async getResponse() {
      const { output } = response();
      return { usage: new Usage(), output };
    },
    async *getStreamedResponse() {
      const { id, output } = response();
      yield {
        type: "response_done" as const,
        response: { id, usage: { inputTokens: 1, outputTokens: 1, totalTokens: 2 }, output },
      };
    },
  };
  const add = agentsTool({
    name: "add",
    description: "Adds two numbers.",
    parameters: z.object({ a: z.number(), b: z.number() }),
    execute: async ({ a, b }) => a + b,
  });
  const agent = new AgentsSdkAgent({
    name: "bench",
    instructions: "Add.",
    tools: [add],
    // biome-ignore lint/suspicious/noExplicitAny: the fake implements the Model interface structurally
    model: model as any,
  });
  return async () => {
    calls = 0;
    if (!streaming) return agentsRun(agent, "go", { maxTurns: n + 2 });
    const result = await agentsRun(agent, "go", { maxTurns: n + 2, stream: true });
    for await (const _ of result) {
      // consume
    }
    await result.completed;
    return result;
  };
};

/** LangGraph's prebuilt ReAct agent with a minimal fake chat model. */
export const langGraph: Runner = (n, streaming) => {
  let calls = 0;
  class FakeToolModel extends BaseChatModel {
    _llmType() {
      return "fake";
    }
    bindTools() {
      return this;
    }
    async _generate() {
      const turn = calls++;
      const message =
        turn < n
          ? new AIMessage({
              content: "",
              tool_calls: [{ id: `c${turn}`, name: "add", args: { a: 1, b: 2 }, type: "tool_call" }],
            })
          : new AIMessage("done");
      return { generations: [{ text: "", message }] };
    }
  }
  const add = lcTool(async ({ a, b }: { a: number; b: number }) => String(a + b), {
    name: "add",
    description: "Adds two numbers.",
    schema: z.object({ a: z.number(), b: z.number() }),
  });
  const agent = createReactAgent({ llm: new FakeToolModel({}), tools: [add] });
  const input = { messages: [{ role: "user", content: "go" }] };
  const config = { recursionLimit: 2 * n + 10 };
  return async () => {
    calls = 0;
    if (!streaming) return agent.invoke(input, config);
    const chunks: unknown[] = [];
    for await (const chunk of await agent.stream(input, { ...config, streamMode: "values" }))
      chunks.push(chunk);
    return chunks.at(-1);
  };
};

export const RUNNERS: Record<string, Runner> = {
  "hand-written loop": handWritten,
  agentloop,
  "Vercel AI SDK": vercelAi,
  "OpenAI Agents SDK": openaiAgents,
  LangGraph: langGraph,
};
