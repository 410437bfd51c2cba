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

/** The part of a Chat Completions request the server reads; other fields are accepted and ignored. */
export const chatRequestSchema = z
  .object({
    model: z.string().optional(),
    messages: z.array(message).min(1),
    stream: z.boolean().nullish(),
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

/**
 * Maps the client's messages to a run: system and developer messages become instructions
 * (after the agent's own), the last message must be the user's new input, and everything
 * before it is the history (assistant tool calls and tool results kept).
 * @returns a one-line problem for a 400 instead, when the conversation cannot be run.
 */
export function toRunInput(request: ChatRequest): RunInput | string {
  const instructions: string[] = [];
  const history: Message[] = [];
  const callNames = new Map<string, string>();
  for (const m of request.messages) {
    if (m.role === "system" || m.role === "developer") instructions.push(text(m.content));
    else if (m.role === "user") history.push({ role: "user", content: text(m.content) });
    else if (m.role === "assistant") {
      const assistant: AssistantMessage = { role: "assistant", content: text(m.content) };
      const calls: ToolCall[] = (m.tool_calls ?? []).map((c) => ({
        id: c.id,
        name: c.function.name,
        arguments: c.function.arguments,
      }));
      for (const call of calls) callNames.set(call.id, call.name);
      if (calls.length > 0) assistant.toolCalls = calls;
      history.push(assistant);
    } else {
      const name = callNames.get(m.tool_call_id);
      if (name === undefined) return `messages: tool message for unknown tool_call_id '${m.tool_call_id}'.`;
      history.push({
        role: "tool",
        toolCallId: m.tool_call_id,
        name,
        content: text(m.content),
        isError: false,
      });
    }
  }
  const last = history.pop();
  if (last?.role !== "user")
    return "messages: the last message must be a user message (the input of the run).";
  return { instructions: instructions.filter(Boolean).join("\n\n"), history, input: last.content };
}

/** A one-line description of the first schema problem of a request body. */
export function describeRequestIssue(error: z.ZodError): string {
  const issue = error.issues[0];
  if (!issue) return "Invalid request body.";
  const where = issue.path.map(String).join(".");
  return `${where ? `${where}: ` : ""}${issue.message}`;
}
