import { z } from "zod";
import { AgentloopError } from "../core/errors.js";
import { DEFAULT_MAX_MEDIA_BYTES, imagePart } from "../core/media.js";
import type {
  AssistantMessage,
  ImageInput,
  MediaPart,
  Message,
  TextInput,
  ToolCall,
  UserInput,
} from "../core/messages.js";
import { echoed } from "../core/redact.js";
import { clientToolFields } from "./client-tools.js";

const textPart = z.object({ type: z.literal("text"), text: z.string() });
/** OpenAI's image part; `detail` is accepted and left to the provider's default. */
const imageUrlPart = z.object({
  type: z.literal("image_url"),
  image_url: z.union([z.string(), z.object({ url: z.string(), detail: z.string().optional() }).loose()]),
});
const anyPart = z.object({ type: z.string() }).loose();
const content = z.union([z.string(), z.array(z.union([textPart, imageUrlPart, anyPart]))]).nullish();

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
 * The part of a Chat Completions request the server reads. `response_format` json_schema (or
 * json_object) is the run's output schema (see `requestedFormat`); `tools`, `tool_choice` and
 * `parallel_tool_calls` are the client's own tools (see `clientToolsOf`); other fields
 * (temperature, ...) are accepted and ignored: the agent's own settings apply.
 */
export const chatRequestSchema = z
  .object({
    model: z.string().optional(),
    messages: z.array(message).min(1),
    stream: z.boolean().nullish(),
    n: z.literal(1, { error: "only n = 1 is supported: an agent gives one answer." }).nullish(),
    stream_options: z.object({ include_usage: z.boolean().optional() }).loose().nullish(),
    response_format: z.unknown().optional(),
    ...clientToolFields,
  })
  .loose();

export type ChatRequest = z.infer<typeof chatRequestSchema>;

/** The run a request asks for: extra instructions, the history before, and the new input. */
export interface RunInput {
  instructions: string;
  history: Message[];
  /** The last user message: its text, or its text and images (checked) as parts. */
  input: UserInput;
}

/** The text of a message's content: its text parts, images left out, other parts named. */
export function text(value: z.infer<typeof content>): string {
  if (value == null) return "";
  if (typeof value === "string") return value;
  return value
    .map((part) => {
      if ("text" in part && typeof part.text === "string") return part.text;
      // Images travel as media beside the text (user messages); other parts are named, not sent.
      return part.type === "image_url" ? "" : `[${part.type} omitted]`;
    })
    .join("");
}

/** Why a request cannot be run: a one-line message and the field at fault (OpenAI's `param`). */
export interface RequestProblem {
  message: string;
  param: string;
  /** 413 for an image over the size limit; else 400. */
  status?: 413;
}

/**
 * A user message's images (`image_url` parts: an http(s) URL or a data URL), checked as the agent
 * checks its input (PNG, JPEG, GIF or WebP, at most 5 MiB each); other parts than text are dropped.
 */
function userMedia(value: z.infer<typeof content>, param: string): MediaPart[] | RequestProblem {
  if (value == null || typeof value === "string") return [];
  const media: MediaPart[] = [];
  for (const [j, part] of value.entries()) {
    if (part.type !== "image_url" || !("image_url" in part)) continue;
    const source = part.image_url as z.infer<typeof imageUrlPart>["image_url"];
    const url = typeof source === "string" ? source : source.url;
    if (!/^(https?:|data:)/i.test(url.trim())) {
      const message = `${param}.content.${j}: image_url.url must be an http(s) URL or a data: URL (data:image/png;base64,...).`;
      return { message, param: `${param}.content.${j}` };
    }
    try {
      media.push(imagePart({ type: "image", image: url }, `${param}.content.${j}`, DEFAULT_MAX_MEDIA_BYTES));
    } catch (error) {
      if (!(error instanceof AgentloopError)) throw error;
      return {
        message: error.message,
        param: `${param}.content.${j}`,
        ...(error.code === "image_too_large" && { status: 413 as const }),
      };
    }
  }
  return media;
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
        const message = `${param}: no assistant tool call with id '${echoed(m.tool_call_id)}' is waiting for this tool message.`;
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
      const ids = echoed([...unanswered].join("', '"), 300);
      return { message: `${param}: the tool calls '${ids}' have no tool message before it.`, param };
    }
    if (m.role === "user") {
      const media = userMedia(m.content, param);
      if (!Array.isArray(media)) return media;
      history.push({ role: "user", content: text(m.content), ...(media.length > 0 && { media }) });
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
  const images = (last.media ?? []).map((part): ImageInput => ({ type: "image", image: part.url }));
  const words: TextInput = { type: "text", text: last.content };
  const input: UserInput = images.length > 0 ? [words, ...images] : last.content;
  return { instructions: instructions.filter(Boolean).join("\n\n"), history, input };
}

/** The first schema problem of a request body, in one line. */
export function describeRequestIssue(error: z.ZodError): RequestProblem {
  const issue = error.issues[0];
  const param = issue?.path.map(String).join(".") ?? "";
  if (!issue) return { message: "Invalid request body.", param };
  return { message: `${param ? `${param}: ` : ""}${issue.message}`, param };
}
