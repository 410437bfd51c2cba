import { z } from "zod";
import type { AssistantMessage, Message, ToolCall } from "../core/messages.js";

const textPart = z.object({ type: z.literal("text"), text: z.string() });
const anyPart = z.object({ type: z.string() }).loose();
const content = z.union([z.string(), z.array(z.union([textPart, anyPart]))]).nullish();

const toolCall = z.object({
  id: z.string(),
  type: z.literal("function").optional(),
  function: z.object({ name: z.string(), arguments: z.string() }),
});

const message = z.discriminatedUnion("role", [
  z.object({ role: z.literal("system"), content }),
  z.object({ role: z.literal("developer"), content }),
  z.object({ role: z.literal("user"), content }),
  z.object({ role: z.literal("assistant"), content, tool_calls: z.array(toolCall).nullish() }),
  z.object({ role: z.literal("tool"), content, tool_call_id: z.string() }),
]);

/**
 * The part of a Chat Completions request the server reads; other fields (temperature, tools,
 * ...) are accepted and ignored: the agent's own settings and tools apply.
 */
export const chatRequestSchema = z
  .object({
    model: z.string().optional(),
    messages: z.array(message).min(1),
    stream: z.boolean().nullish(),
    n: z.literal(1, { error: "only n = 1 is supported: an agent gives one answer." }).nullish(),
    stream_options: z.object({ include_usage: z.boolean().optional() }).loose().nullish(),
  })
  .loose();

export type ChatRequest = z.infer<typeof chatRequestSchema>;

/** The run a request asks for: extra instructions, the history before, and the new input. */
export interface RunInput {
  instructions: string;
  history: Message[];
  input: string;
}

function text(value: z.infer<typeof content>): string {
  if (value == null) return "";
  if (typeof value === "string") return value;
  return value
    .map((part) => ("text" in part && typeof part.text === "string" ? part.text : `[${part.type} omitted]`))
    .join("");
}

/** Why a request cannot be run: a one-line message and the field at fault (OpenAI's `param`). */
export interface RequestProblem {
  message: string;
  param: string;
}

/**
 * Maps the client's messages to a run: system and developer messages become instructions
 * (appended after the agent's own), the last message must be the user's new input, and
 * everything before it is the history, assistant tool calls and their tool results kept.
 * Every tool call must be answered by a tool message before the next user or assistant
 * message, as in OpenAI's API.
 * @returns a problem for a 400 instead, when the conversation cannot be run.
 */
export function toRunInput(request: ChatRequest): RunInput | RequestProblem {
  const instructions: string[] = [];
  const history: Message[] = [];
  const callNames = new Map<string, string>();
  let unanswered = new Set<string>();
  for (const [i, m] of request.messages.entries()) {
    const param = `messages.${i}`;
    if (m.role === "system" || m.role === "developer") {
      instructions.push(text(m.content));
      continue;
    }
    if (m.role === "tool") {
      const name = callNames.get(m.tool_call_id);
      if (name === undefined || !unanswered.delete(m.tool_call_id)) {
        const message = `${param}: no assistant tool call with id '${m.tool_call_id}' is waiting for this tool message.`;
        return { message, param };
      }
      history.push({
        role: "tool",
        toolCallId: m.tool_call_id,
        name,
        content: text(m.content),
        isError: false,
      });
      continue;
    }
    if (unanswered.size > 0) {
      const ids = [...unanswered].join("', '");
      return { message: `${param}: the tool calls '${ids}' have no tool message before it.`, param };
    }
    if (m.role === "user") {
      history.push({ role: "user", content: text(m.content) });
      continue;
    }
    const assistant: AssistantMessage = { role: "assistant", content: text(m.content) };
    const calls: ToolCall[] = (m.tool_calls ?? []).map((c) => ({
      id: c.id,
      name: c.function.name,
      arguments: c.function.arguments,
    }));
    for (const call of calls) callNames.set(call.id, call.name);
    unanswered = new Set(calls.map((call) => call.id));
    if (calls.length > 0) assistant.toolCalls = calls;
    history.push(assistant);
  }
  const last = history.pop();
  if (last?.role !== "user") {
    const message = "messages: the last message must be a user message (the input of the run).";
    return { message, param: "messages" };
  }
  return { instructions: instructions.filter(Boolean).join("\n\n"), history, input: last.content };
}

/** The first schema problem of a request body, in one line. */
export function describeRequestIssue(error: z.ZodError): RequestProblem {
  const issue = error.issues[0];
  const param = issue?.path.map(String).join(".") ?? "";
  if (!issue) return { message: "Invalid request body.", param };
  return { message: `${param ? `${param}: ` : ""}${issue.message}`, param };
}
