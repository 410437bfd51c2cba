import { lazyTool, type Tool } from "../tool.js";

/** Ends the run with stop reason `task_completion`; `result` becomes the output. */
const taskCompletion: Tool = lazyTool({
  name: "task_completion",
  description: "Call this when the task is done. `result` is your complete final answer for the user.",
  parameters: {
    type: "object",
    properties: {
      result: { type: "string", description: "The complete final answer or result of the task." },
    },
    required: ["result"],
  },
  schema: (z) => z.object({ result: z.string() }),
  loopBreaking: true,
  execute: ({ result }) => result,
});

/** Ends the run with stop reason `ask_question`; the run waits for the user's answer. */
export const askQuestion: Tool = lazyTool({
  name: "ask_question",
  description:
    "Ask the user a question when you need information only they can give. The run waits for the answer.",
  parameters: {
    type: "object",
    properties: { question: { type: "string", description: "The question for the user." } },
    required: ["question"],
  },
  schema: (z) => z.object({ question: z.string() }),
  loopBreaking: true,
  execute: ({ question }) => question,
});

/** Ends the run with stop reason `converse`: a conversational reply with no task to do. */
const converse: Tool = lazyTool({
  name: "converse",
  description: "Reply to the user conversationally when there is no task to perform (greetings, small talk).",
  parameters: {
    type: "object",
    properties: { message: { type: "string", description: "Your message to the user." } },
    required: ["message"],
  },
  schema: (z) => z.object({ message: z.string() }),
  loopBreaking: true,
  execute: ({ message }) => message,
});

/** The loop-breaking tools offered in explicit mode, in this order. */
export function loopBreakingTools(): Tool[] {
  return [taskCompletion, askQuestion, converse];
}
