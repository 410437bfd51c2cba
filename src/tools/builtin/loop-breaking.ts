import { z } from "zod";
import { defineTool, type Tool } from "../tool.js";

/** Ends the run with stop reason `task_completion`; `result` becomes the output. */
export const taskCompletion: Tool = defineTool({
  name: "task_completion",
  description: "Call this when the task is done. `result` is your complete final answer for the user.",
  parameters: z.object({ result: z.string().describe("The complete final answer or result of the task.") }),
  loopBreaking: true,
  execute: ({ result }) => result,
});

/** Ends the run with stop reason `ask_question`; the run waits for the user's answer. */
export const askQuestion: Tool = defineTool({
  name: "ask_question",
  description:
    "Ask the user a question when you need information only they can give. The run waits for the answer.",
  parameters: z.object({ question: z.string().describe("The question for the user.") }),
  loopBreaking: true,
  execute: ({ question }) => question,
});

/** Ends the run with stop reason `converse`: a conversational reply with no task to do. */
export const converse: Tool = defineTool({
  name: "converse",
  description: "Reply to the user conversationally when there is no task to perform (greetings, small talk).",
  parameters: z.object({ message: z.string().describe("Your message to the user.") }),
  loopBreaking: true,
  execute: ({ message }) => message,
});

/** The loop-breaking tools offered in explicit mode, in this order. */
export function loopBreakingTools(): Tool[] {
  return [taskCompletion, askQuestion, converse];
}
