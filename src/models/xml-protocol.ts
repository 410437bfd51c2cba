/**
 * The xml tool protocol (SPEC section 1) for models without native function calling: tool
 * calls are written in the reply's text as `<tool>{...}</tool>` blocks and results go back as
 * user messages. `xmlToolProtocol` wraps any Model so the loop still sees ordinary tool calls.
 */
import { errorMessage } from "../core/errors.js";
import { isObject } from "../core/json.js";
import {
  type MediaPart,
  type Message,
  nestedTooDeep,
  type ToolCall,
  tooDeepMessage,
} from "../core/messages.js";
import type { Model, ModelEvent, ModelReply, ModelRequest, ToolSpec } from "./adapter.js";
import { type ToolBlock, XmlReplyParser } from "./xml-parser.js";

const FORMAT_HINT = 'Write one JSON object: {"server_name": ..., "tool_name": ..., "arguments": {...}}';

/**
 * The system-prompt text that teaches the xml protocol: every tool in the given order with its
 * description and compact JSON Schema, then the format rules. Deterministic; "" for no tools.
 */
export function xmlToolInstructions(tools: readonly ToolSpec[]): string {
  if (tools.length === 0) return "";
  const catalogue = tools.map(
    (tool) =>
      `### ${tool.name}\n${tool.description.trim() || "(no description)"}\n` +
      `Arguments (JSON Schema): ${JSON.stringify(tool.parameters)}`,
  );
  return [
    "# Tools",
    "",
    "You can call the tools below. Each lists what it does and the JSON Schema of its arguments.",
    "",
    catalogue.join("\n\n"),
    "",
    "# How to call a tool",
    "",
    "To call a tool, write a block like this in your reply:",
    '<tool>{"server_name": "local", "tool_name": "NAME", "arguments": {...}}</tool>',
    "",
    '- Put exactly one JSON object in each <tool> block; "arguments" must match the tool\'s schema.',
    "- You may write several <tool> blocks in one reply; they run in order.",
    "- Think inside <thinking>...</thinking>; it is not part of your answer.",
    "- Each result comes back in a user message starting \"Tool 'NAME' result:\" " +
      "(or \"Tool 'NAME' error:\" when the call failed). Never write results yourself.",
    "- To give your final answer, reply without any <tool> block.",
  ].join("\n");
}

/**
 * Wraps a model without native function calling: the history is rendered in the xml protocol
 * (no tool messages reach `inner`, and `tools` is sent empty because the catalogue is already in
 * the system prompt), and `<tool>` / `<thinking>` blocks in the streamed reply become tool calls
 * and thinking. Keeps the `Model` contract: never throws, ends with one `done` or `error`.
 */
export function xmlToolProtocol(inner: Model): Model {
  let lastId = 0;
  return {
    id: inner.id,
    ...(inner.price && { price: inner.price }),
    ...(inner.provider && { provider: inner.provider }),
    ...(inner.baseURL && { baseURL: inner.baseURL }),
    async *stream(request: ModelRequest, options: { signal?: AbortSignal }): AsyncGenerator<ModelEvent> {
      try {
        // Ids continue after any xml_<n> already in the conversation, so they stay unique in it.
        lastId = Math.max(lastId, highestXmlId(request.messages));
        const parser = new XmlReplyParser();
        let sawText = false;
        let sawThinking = false;
        const converted: ModelRequest = {
          system: request.system,
          messages: toXmlMessages(request.messages),
          tools: [],
        };
        for await (const event of inner.stream(converted, options)) {
          if (event.type === "text_delta") {
            sawText ||= event.text !== "";
            yield* deltaEvents(parser.push(event.text));
          } else if (event.type === "thinking_delta") {
            sawThinking ||= event.text !== "";
            parser.passThinking(event.text);
            yield event;
          } else if (event.type === "error") {
            yield event;
            return;
          } else {
            const reply = event.message;
            // A provider that sent its reply only in `done`: parse (and stream) it now.
            if (!sawThinking && reply.thinking) {
              parser.passThinking(reply.thinking);
              yield { type: "thinking_delta", text: reply.thinking };
            }
            if (!sawText && reply.content) yield* deltaEvents(parser.push(reply.content));
            yield* deltaEvents(parser.end());
            const toolCalls = parser.blocks.map((block) => ({
              id: `xml_${++lastId}`,
              ...readToolBlock(block),
            }));
            toolCalls.push(...reply.toolCalls);
            const message: ModelReply = {
              content: parser.text,
              toolCalls,
              finishReason: toolCalls.length > 0 ? "tool_calls" : reply.finishReason,
              usage: reply.usage,
            };
            if (parser.thinking) message.thinking = parser.thinking;
            yield { type: "done", message };
            return;
          }
        }
        yield {
          type: "error",
          error: { code: "invalid_response", message: "The model stream ended without a reply." },
        };
      } catch (error) {
        yield {
          type: "error",
          error: {
            code: "invalid_response",
            message: `xml tool protocol: ${oneLine(errorMessage(error))}`,
          },
        };
      }
    },
  };
}

function* deltaEvents(deltas: ReturnType<XmlReplyParser["push"]>): Generator<ModelEvent> {
  for (const delta of deltas) {
    yield { type: delta.type === "text" ? "text_delta" : "thinking_delta", text: delta.text };
  }
}

/**
 * Renders a history in the xml protocol: tool calls become `<tool>` blocks in the assistant's
 * text, tool results become user messages (their images with them), and consecutive user messages
 * are merged so roles alternate. Thinking is not sent back.
 */
export function toXmlMessages(messages: readonly Message[]): Message[] {
  const out: Message[] = [];
  const pushUser = (content: string, media: readonly MediaPart[] | undefined) => {
    const last = out.at(-1);
    if (last?.role === "user") {
      last.content = `${last.content}\n\n${content}`;
      if (media?.length) last.media = [...(last.media ?? []), ...media];
    } else out.push({ role: "user", content, ...(media?.length && { media: [...media] }) });
  };
  for (const message of messages) {
    if (message.role === "user") pushUser(message.content, message.media);
    else if (message.role === "tool") {
      pushUser(
        `Tool '${message.name}' ${message.isError ? "error" : "result"}:\n${message.content}`,
        message.media,
      );
    } else {
      const blocks = (message.toolCalls ?? []).map(renderCall);
      const content = [message.content, ...blocks].filter((part) => part !== "").join("\n");
      out.push({ role: "assistant", content });
    }
  }
  return out;
}

function renderCall(call: ToolCall): string {
  // A malformed block goes back as the model wrote it, so it sees its mistake beside the error.
  if (call.invalid !== undefined && call.id.startsWith("xml_")) return `<tool>${call.arguments}</tool>`;
  let args: unknown = call.arguments;
  try {
    // Arguments nested too deep to serialise again go back as the raw text, like invalid JSON.
    if (!nestedTooDeep(call.arguments)) args = call.arguments.trim() === "" ? {} : JSON.parse(call.arguments);
  } catch {
    // Not JSON: sent as the raw text.
  }
  return `<tool>${JSON.stringify({ server_name: "local", tool_name: call.name, arguments: args })}</tool>`;
}

function highestXmlId(messages: readonly Message[]): number {
  let highest = 0;
  for (const message of messages) {
    if (message.role !== "assistant") continue;
    for (const call of message.toolCalls ?? []) {
      const match = /^xml_(\d+)$/.exec(call.id);
      if (match) highest = Math.max(highest, Number(match[1]));
    }
  }
  return highest;
}

type BlockCall = Omit<ToolCall, "id">;

/**
 * Reads one `<tool>` block as a call. A malformed block becomes a call with `invalid` set to a
 * one-line reason (and `arguments` = the block as written); `name` is "unknown" unless the
 * tool_name could be read.
 */
function readToolBlock(block: ToolBlock): BlockCall {
  const invalid = (reason: string, name?: string): BlockCall => ({
    name: name ?? guessName(block.raw) ?? "unknown",
    arguments: block.raw,
    invalid: reason,
  });
  if (!block.closed) {
    const why = block.inString
      ? " (a JSON string in it is not closed, so a </tool> inside it does not count)"
      : "";
    return invalid(`Unclosed <tool> block: end it with </tool>${why}.`);
  }
  const parsed = parseBlockJson(block);
  if (!parsed.ok) return invalid(`Invalid JSON in <tool> block: ${parsed.message}. ${FORMAT_HINT}`);
  const value = parsed.value;
  if (!isObject(value))
    return invalid(`Invalid <tool> block: expected one JSON object, got ${kind(value)}. ${FORMAT_HINT}`);
  const name = value.tool_name;
  if (name === undefined) return invalid(`Invalid <tool> block: "tool_name" is missing. ${FORMAT_HINT}`);
  if (typeof name !== "string" || name.trim() === "") {
    return invalid(`Invalid <tool> block: "tool_name" must be a non-empty string. ${FORMAT_HINT}`);
  }
  const args = value.arguments ?? {};
  if (!isObject(args)) {
    return invalid(
      `Invalid <tool> block: "arguments" of '${name}' must be a JSON object, got ${kind(args)}. ${FORMAT_HINT}`,
      name,
    );
  }
  if (nestedTooDeep(args)) return invalid(tooDeepMessage(name.trim()), name.trim());
  return { name: name.trim(), arguments: JSON.stringify(args) };
}

type JsonResult = { ok: true; value: unknown } | { ok: false; message: string };

/** Parses the block's JSON: with CDATA wrappers stripped, else with CDATA sections as JSON strings. */
function parseBlockJson(block: ToolBlock): JsonResult {
  const candidates = [block.parts.map((p) => p.text).join("")];
  if (block.parts.some((p) => p.cdata)) {
    candidates.push(block.parts.map((p) => (p.cdata ? JSON.stringify(p.text) : p.text)).join(""));
  }
  let first: JsonResult | undefined;
  for (const candidate of candidates) {
    const result = parseJson(unfence(candidate.trim()));
    if (result.ok) return result;
    first ??= result;
  }
  return first as JsonResult;
}

function parseJson(text: string): JsonResult {
  if (text === "") return { ok: false, message: "the block is empty" };
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch (error) {
    const message = oneLine(errorMessage(error)).replace(/\.$/, "");
    return { ok: false, message: message.length > 200 ? `${message.slice(0, 200)}...` : message };
  }
}

/** Removes a Markdown code fence around the JSON (```json ... ```), which models often add. */
function unfence(text: string): string {
  const match = /^```[\w-]*\s*([\s\S]*?)\s*```$/.exec(text);
  return match ? (match[1] ?? "") : text;
}

function guessName(raw: string): string | undefined {
  return /"tool_name"\s*:\s*"([^"\\]+)"/.exec(raw)?.[1]?.trim() || undefined;
}

function kind(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  return typeof value === "object" ? "an object" : `a ${typeof value}`;
}

function oneLine(text: string): string {
  return text.replace(/\s+/g, " ").trim();
}
