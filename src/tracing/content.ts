/**
 * Message content in the shapes of the GenAI semantic conventions (gen-ai-input-messages.json,
 * gen-ai-output-messages.json, gen-ai-system-instructions.json), as the JSON text a span attribute
 * holds. Only made when content capture is on; every text goes through `redact` first.
 */
import type { Message, ToolCall } from "../core/messages.js";
import { incompleteReason, type ModelReply } from "../models/adapter.js";

type Redact = (text: string) => string;
type Part = Record<string, unknown>;
interface ChatMessage {
  role: "system" | "user" | "assistant" | "tool";
  parts: Part[];
  finish_reason?: string;
}

const same: Redact = (text) => text;

/** `gen_ai.system_instructions`: the system prompt as one text part. */
export function systemInstructions(system: string, redact: Redact = same): string {
  return JSON.stringify([{ type: "text", content: redact(system) }]);
}

/** `gen_ai.input.messages`: the history sent, in order. */
export function inputMessages(messages: readonly Message[], redact: Redact = same): string {
  const out: ChatMessage[] = [];
  for (const message of messages) {
    if (message.role === "user") {
      const parts: Part[] = [{ type: "text", content: redact(message.content) }];
      for (const media of message.media ?? []) parts.push(mediaPart(media.type, media.url));
      out.push({ role: "user", parts });
    } else if (message.role === "assistant") {
      out.push({ role: "assistant", parts: assistantParts(message, redact) });
    } else {
      const part = { type: "tool_call_response", id: message.toolCallId, response: redact(message.content) };
      out.push({ role: "tool", parts: [part] });
    }
  }
  return JSON.stringify(out);
}

/** `gen_ai.output.messages`: the reply as one choice, with the conventions' finish reason. */
export function outputMessages(reply: ModelReply, redact: Redact = same): string {
  const parts = assistantParts(reply, redact);
  if (reply.refusal !== undefined && !reply.content)
    parts.push({ type: "text", content: redact(reply.refusal) });
  return JSON.stringify([{ role: "assistant", parts, finish_reason: finishReason(reply) }]);
}

/** A tool call's arguments as the object they are, or the text when they are not JSON. */
function argumentsValue(text: string, redact: Redact = same): unknown {
  const clean = redact(text);
  try {
    return JSON.parse(clean) as unknown;
  } catch {
    return clean;
  }
}

function assistantParts(
  message: { content: string; thinking?: string; toolCalls?: readonly ToolCall[] },
  redact: Redact,
): Part[] {
  const parts: Part[] = [];
  if (message.thinking) parts.push({ type: "reasoning", content: redact(message.thinking) });
  if (message.content) parts.push({ type: "text", content: redact(message.content) });
  for (const call of message.toolCalls ?? []) {
    parts.push({
      type: "tool_call",
      id: call.id,
      name: call.name,
      arguments: argumentsValue(call.arguments, redact),
    });
  }
  return parts;
}

/** An image or audio clip: a URL the provider fetches as a `uri` part; inline data only named (it may be megabytes). */
function mediaPart(modality: "image" | "audio", url: string): Part {
  if (!url.startsWith("data:")) return { type: "uri", modality, uri: url };
  const mimeType = url.slice(5, url.search(/[;,]/));
  return { type: "text", content: `[${modality}: ${mimeType}]` };
}

/** The conventions' finish reason (stop, length, content_filter, tool_call) of the provider's own. */
function finishReason(reply: ModelReply): string {
  const cut = incompleteReason(reply.finishReason);
  if (cut) return cut;
  if (reply.refusal !== undefined && reply.finishReason === "refusal") return "content_filter";
  return reply.toolCalls.length > 0 ? "tool_call" : "stop";
}
