import type { ToolMessage } from "../core/messages.js";
import type { ModelRequest } from "../models/adapter.js";
import { type ScriptedModel, type ScriptedReply, scriptedModel } from "./scripted-model.js";

/**
 * The three questions every agent-loop lesson starts with: one needing no tool, one needing a
 * calculator call, and a chain where each step needs the result of the one before. `demoModel`
 * answers them (`agentloop demo`, `examples/first-agent.ts`).
 */
export const DEMO_QUESTIONS = [
  "What is the capital of France?",
  "What is 157.09 * 493.89?",
  "When I was 6, my brother was half my age. Now I am 70. How old is my brother?",
] as const;

const calculate = (expression: string): ScriptedReply["toolCalls"] => [
  { name: "calculator", arguments: { expression } },
];

/**
 * Each question's replies, one per model call: the n-th gets the results of the calls so far
 * (their content, in order), so every answer quotes what the real tools returned.
 */
const SCRIPTS: Record<(typeof DEMO_QUESTIONS)[number], ((results: string[]) => ScriptedReply)[]> = {
  [DEMO_QUESTIONS[0]]: [
    () => ({
      thinking: "This is general knowledge; no tool is needed.",
      text: "The capital of France is Paris.",
    }),
  ],
  [DEMO_QUESTIONS[1]]: [
    () => ({
      thinking: "Multiplying decimals in my head risks a slip: the calculator is exact.",
      toolCalls: calculate("157.09 * 493.89"),
    }),
    ([product]) => ({ text: `157.09 * 493.89 = ${product}` }),
  ],
  [DEMO_QUESTIONS[2]]: [
    () => ({
      thinking: "First, how old was the brother then? Half of 6.",
      toolCalls: calculate("6 / 2"),
    }),
    ([then]) => ({
      thinking: `He was ${then} when I was 6. The age gap is 6 minus that, and it never changes.`,
      toolCalls: calculate(`6 - ${then}`),
    }),
    ([, gap]) => ({
      thinking: `He is ${gap} years younger, so now he is 70 minus ${gap}.`,
      toolCalls: calculate(`70 - ${gap}`),
    }),
    ([then, gap, now]) => ({
      text: `Your brother is ${now}. He was ${then} when you were 6, so he is ${gap} years younger, and the gap never changes (not 70 / 2 = 35).`,
    }),
  ],
};

/**
 * A scripted model that answers `DEMO_QUESTIONS` as a real model would, thinking first and calling
 * the built-in `calculator` where arithmetic is needed, with answers built from the tools' actual
 * results. No key, no network. A call that failed is reported as such; any other question gets a
 * reply saying what the demo model knows.
 */
export function demoModel(): ScriptedModel {
  return scriptedModel((request) => reply(request), { id: "agentloop-demo" });
}

function reply({ messages }: ModelRequest): ScriptedReply {
  const asked = messages.findLastIndex((m) => m.role === "user");
  const question = messages[asked]?.content ?? "";
  const results = messages.slice(asked + 1).filter((m): m is ToolMessage => m.role === "tool");
  const failed = results.find((r) => r.isError);
  if (failed) return { text: `The ${failed.name} tool failed: ${failed.content}` };
  const script = SCRIPTS[question as keyof typeof SCRIPTS];
  const step = script?.[results.length];
  if (!step) {
    return {
      text: `I am agentloop's demo model: I only know these questions: ${DEMO_QUESTIONS.join(" / ")} For anything else, use a real model (set OPENAI_API_KEY, or --base-url for a local server).`,
    };
  }
  return step(results.map((r) => r.content));
}
