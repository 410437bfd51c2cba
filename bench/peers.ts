// One workload (bench/workload.ts), every framework. Each gets a lean hand-written fake model in
// its own interface, doing what agentloop's fake does and no more (no recording of prompts, no
// validation of its own): a plain `LanguageModelV4` object for the AI SDK, a plain `Model` for the
// OpenAI Agents SDK, a `BaseChatModel` with `_generate` and `_streamResponseChunks` for LangGraph.
// Streaming runs use each framework's streaming path end to end (the fake streams, the caller
// consumes the framework's stream of events or tokens). Every framework runs the same async tool.

import type { LanguageModelV4, LanguageModelV4StreamPart } from "@ai-sdk/provider";
import { BaseChatModel } from "@langchain/core/language_models/chat_models";
import { AIMessage, AIMessageChunk } from "@langchain/core/messages";
import { ChatGenerationChunk } from "@langchain/core/outputs";
import { tool as lcTool } from "@langchain/core/tools";
import { createReactAgent } from "@langchain/langgraph/prebuilt";
import {
  type Model as AgentsModel,
  Agent as AgentsSdkAgent,
  run as agentsRun,
  tool as agentsTool,
  setTracingDisabled,
  Usage,
} from "@openai/agents";
import { tool as aiTool, generateText, isStepCount, streamText } from "ai";
import { Agent, defineTool } from "../dist/index.js";
import { add, argsOf, fakeModel, floor, schema } from "./workload.ts";

/**
 * A framework set up for N iterations (agent, tools and fake model built outside the timed part);
 * each call of the returned function is one run, resolving to the framework's own result. `probe`
 * is called as the model is asked for its last reply (bench/heap-one.ts measures the heap then).
 */
export type Runner = (n: number, streaming: boolean, probe?: () => void) => () => Promise<unknown>;

setTracingDisabled(true); // the Agents SDK would otherwise trace every run

/** Throws unless the run asked the model N + 1 times (N tool calls and the answer). */
function counted(n: number, calls: () => number, framework: string): void {
  if (calls() !== n + 1) throw new Error(`${framework} made ${calls()} model calls, not ${n + 1}`);
}

/** The floor: a careful hand-written loop on agentloop's fake model (bench/workload.ts). */
export const handWritten: Runner = (n, streaming, probe) => floor(fakeModel(n, streaming, probe), streaming);

/** agentloop with its defaults (guards, tool timeout, pruning), `maxIterations` raised to N + 1. */
export const agentloop: Runner = (n, streaming, probe) => {
  const model = fakeModel(n, streaming, probe);
  const agent = new Agent({
    model,
    tools: [defineTool({ name: "add", description: "Adds two numbers.", parameters: schema, execute: add })],
    maxIterations: n + 1,
  });
  return async () => {
    model.reset();
    let result: Awaited<ReturnType<typeof agent.run>>;
    if (streaming) {
      const run = agent.stream("go");
      for await (const _event of run);
      result = await run.result;
    } else result = await agent.run("go");
    if (result.stopReason !== "final_answer") throw new Error(`agentloop stopped with ${result.stopReason}`);
    return result;
  };
};

const aiUsage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 1, text: 1, reasoning: 0 },
};

/** The Vercel AI SDK: `generateText` / `streamText` on a plain `LanguageModelV4` object. */
export const vercelAi: Runner = (n, streaming, probe) => {
  let calls = 0;
  const turn = () => {
    const t = calls++;
    if (t === n) probe?.();
    return t;
  };
  const finish = (t: number) => ({
    unified: t < n ? ("tool-calls" as const) : ("stop" as const),
    raw: undefined,
  });
  const call = (t: number) => ({
    type: "tool-call" as const,
    toolCallId: `c${t}`,
    toolName: "add",
    input: argsOf(t),
  });
  const model: LanguageModelV4 = {
    specificationVersion: "v4",
    provider: "bench",
    modelId: "fake",
    supportedUrls: {},
    async doGenerate() {
      const t = turn();
      const content = t < n ? [call(t)] : [{ type: "text" as const, text: "done" }];
      return { content, finishReason: finish(t), usage: aiUsage, warnings: [] };
    },
    async doStream() {
      const t = turn();
      const parts: LanguageModelV4StreamPart[] = [
        { type: "text-start", id: "t" },
        { type: "text-delta", id: "t", delta: t < n ? "ok" : "done" },
        { type: "text-end", id: "t" },
      ];
      if (t < n) parts.push(call(t));
      parts.push({ type: "finish", finishReason: finish(t), usage: aiUsage });
      const stream = new ReadableStream<LanguageModelV4StreamPart>({
        start(controller) {
          for (const part of parts) controller.enqueue(part);
          controller.close();
        },
      });
      return { stream };
    },
  };
  const tools = {
    add: aiTool({ description: "Adds two numbers.", inputSchema: schema, execute: add }),
  };
  return async () => {
    calls = 0;
    const stopWhen = isStepCount(n + 1);
    if (!streaming) {
      const result = await generateText({ model, tools, stopWhen, prompt: "go" });
      counted(n, () => calls, "the AI SDK");
      return result;
    }
    const result = streamText({ model, tools, stopWhen, prompt: "go" });
    for await (const _part of result.fullStream);
    counted(n, () => calls, "the AI SDK");
    return result.steps;
  };
};

/** The OpenAI Agents SDK: `run` on a plain `Model`. */
export const openaiAgents: Runner = (n, streaming, probe) => {
  let calls = 0;
  const output = (t: number, text: string) => {
    const message = {
      type: "message" as const,
      role: "assistant" as const,
      status: "completed" as const,
      content: [{ type: "output_text" as const, text }],
    };
    const call = {
      type: "function_call" as const,
      callId: `c${t}`,
      name: "add",
      arguments: argsOf(t),
      status: "completed" as const,
    };
    if (t >= n) return [message];
    return text ? [message, call] : [call];
  };
  const turn = () => {
    const t = calls++;
    if (t === n) probe?.();
    return t;
  };
  const model: AgentsModel = {
    async getResponse() {
      const t = turn();
      return { usage: new Usage(), output: output(t, t < n ? "" : "done"), responseId: `r${t}` };
    },
    async *getStreamedResponse() {
      const t = turn();
      const text = t < n ? "ok" : "done";
      yield { type: "output_text_delta", delta: text };
      yield {
        type: "response_done",
        response: {
          id: `r${t}`,
          usage: { inputTokens: 1, outputTokens: 1, totalTokens: 2 },
          output: output(t, text),
        },
      };
    },
  };
  const agent = new AgentsSdkAgent({
    name: "bench",
    instructions: "Add.",
    tools: [agentsTool({ name: "add", description: "Adds two numbers.", parameters: schema, execute: add })],
    model,
  });
  return async () => {
    calls = 0;
    if (!streaming) {
      const result = await agentsRun(agent, "go", { maxTurns: n + 2 });
      counted(n, () => calls, "the Agents SDK");
      return result;
    }
    const result = await agentsRun(agent, "go", { maxTurns: n + 2, stream: true });
    for await (const _event of result);
    await result.completed;
    counted(n, () => calls, "the Agents SDK");
    return result;
  };
};

/** LangGraph's prebuilt ReAct agent: `invoke`, or `stream` with `streamMode: "messages"` (tokens). */
export const langGraph: Runner = (n, streaming, probe) => {
  let calls = 0;
  const turn = () => {
    const t = calls++;
    if (t === n) probe?.();
    return t;
  };
  class FakeToolModel extends BaseChatModel {
    _llmType() {
      return "fake";
    }
    override bindTools() {
      return this;
    }
    async _generate() {
      const t = turn();
      const message =
        t < n
          ? new AIMessage({
              content: "",
              tool_calls: [{ id: `c${t}`, name: "add", args: JSON.parse(argsOf(t)), type: "tool_call" }],
            })
          : new AIMessage("done");
      return { generations: [{ text: "", message }] };
    }
    override async *_streamResponseChunks() {
      const t = turn();
      const text = t < n ? "ok" : "done";
      yield new ChatGenerationChunk({ text, message: new AIMessageChunk({ content: text }) });
      if (t < n)
        yield new ChatGenerationChunk({
          text: "",
          message: new AIMessageChunk({
            content: "",
            tool_call_chunks: [
              { id: `c${t}`, name: "add", args: argsOf(t), index: 0, type: "tool_call_chunk" },
            ],
          }),
        });
    }
  }
  const tool = lcTool(add, { name: "add", description: "Adds two numbers.", schema });
  const agent = createReactAgent({ llm: new FakeToolModel({}), tools: [tool] });
  const input = { messages: [{ role: "user", content: "go" }] };
  const config = { recursionLimit: 2 * n + 10 };
  return async () => {
    calls = 0;
    if (!streaming) {
      const result = await agent.invoke(input, config);
      counted(n, () => calls, "LangGraph");
      return result;
    }
    const chunks: unknown[] = [];
    for await (const chunk of await agent.stream(input, { ...config, streamMode: "messages" }))
      chunks.push(chunk);
    counted(n, () => calls, "LangGraph");
    return chunks;
  };
};

export const RUNNERS: Record<string, Runner> = {
  "hand-written loop": handWritten,
  agentloop,
  "Vercel AI SDK": vercelAi,
  "OpenAI Agents SDK": openaiAgents,
  LangGraph: langGraph,
};
