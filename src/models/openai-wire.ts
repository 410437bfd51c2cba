import type OpenAI from "openai";
import { AzureOpenAI } from "openai";
import type { Message } from "../core/messages.js";
import type { ModelRequest } from "./adapter.js";

/** Request mapping of the OpenAI-compatible adapter: runtime messages and tools → a Chat Completions body. */

const REASONING_MODEL = /^(o1|o3|o4|gpt-5)/;

type WireMessage = OpenAI.Chat.Completions.ChatCompletionMessageParam;
type WireTool = OpenAI.Chat.Completions.ChatCompletionFunctionTool;
export type SystemRole = "system" | "developer";

/** Maps the runtime messages to Chat Completions messages (the system prompt first when non-empty). */
export function toChatMessages(
  system: string,
  messages: readonly Message[],
  systemRole: SystemRole = "system",
): WireMessage[] {
  const out: WireMessage[] = [];
  if (system) out.push({ role: systemRole, content: system });
  for (const m of messages) {
    if (m.role === "user") out.push({ role: "user", content: m.content });
    else if (m.role === "tool") out.push({ role: "tool", tool_call_id: m.toolCallId, content: m.content });
    else if (m.toolCalls && m.toolCalls.length > 0) {
      out.push({
        role: "assistant",
        content: m.content || null,
        tool_calls: m.toolCalls.map((c) => ({
          id: c.id,
          type: "function" as const,
          // Some servers reject an empty arguments string; "{}" means the same.
          function: { name: c.name, arguments: c.arguments || "{}" },
        })),
      });
    } else out.push({ role: "assistant", content: m.content });
  }
  return out;
}

export interface ChatRequestOptions {
  model: string;
  stream: boolean;
  systemRole?: SystemRole;
  parallelToolCalls?: boolean;
  extraBody?: Record<string, unknown>;
}

/**
 * The request body: model, messages, tools and `parallel_tool_calls` (both only with tools),
 * stream flags, then `extraBody`.
 */
export function toChatRequestBody(request: ModelRequest, o: ChatRequestOptions): Record<string, unknown> {
  const tools: WireTool[] = request.tools.map((t) => ({
    type: "function",
    function: { name: t.name, description: t.description, parameters: t.parameters },
  }));
  return {
    model: o.model,
    messages: toChatMessages(request.system, request.messages, o.systemRole),
    ...(tools.length > 0 ? { tools } : {}),
    ...(tools.length > 0 && o.parallelToolCalls !== undefined
      ? { parallel_tool_calls: o.parallelToolCalls }
      : {}),
    ...(o.stream ? { stream_options: { include_usage: true } } : {}),
    ...o.extraBody,
    stream: o.stream,
  };
}

/** "developer" for an OpenAI reasoning model on api.openai.com, else "system". */
export function defaultSystemRole(model: string, client: OpenAI): SystemRole {
  let host = "";
  try {
    host = new URL(client.baseURL).hostname;
  } catch {}
  const openai = host === "api.openai.com" && !(client instanceof AzureOpenAI);
  return openai && REASONING_MODEL.test(model) ? "developer" : "system";
}
