/**
 * The runtime's provider-neutral conversation. Adapters translate it to and from their
 * wire format; the loop only appends to it.
 */

/**
 * A tool call as the model requested it. `arguments` is the raw JSON text, unparsed. The loop
 * makes each id unique within its reply, and marks `invalid` a call whose arguments are not one
 * JSON object, so a call without `invalid` always has arguments a provider takes back.
 */
export interface ToolCall {
  id: string;
  name: string;
  arguments: string;
  /**
   * Set when the model's output could not be read as a well-formed call (e.g. a malformed
   * XML tool block, arguments cut off at the token limit or not one JSON object): the reason,
   * which goes back to the model as the call's error result. Adapters send such a call's
   * arguments back as `{}`.
   */
  invalid?: string;
}

/**
 * An image (or an audio clip) the model reads beside a message's text. `url` is an http(s) URL the
 * provider fetches, or a `data:` URL with the bytes inline (`data:image/png;base64,...`). Plain
 * data, stored with the session; never written to logs, events or progress output (those show
 * `[image: image/png, 12.3 KB]`). Build user images with `userContent` checks (see `UserInput`).
 */
export interface MediaPart {
  type: "image" | "audio";
  url: string;
}

export interface UserMessage {
  role: "user";
  content: string;
  /** Images sent with the text, in order. */
  media?: MediaPart[];
  /**
   * Set on the summary a compaction wrote (SPEC section 13): it stands for `replaced` earlier
   * messages. In a stored log it follows the `kept` newest messages it left verbatim.
   */
  compaction?: { replaced: number; kept: number };
}

/** A text part of a user input. */
export interface TextInput {
  type: "text";
  text: string;
}

/**
 * An image part of a user input: a URL (http(s), or a `data:` URL), raw bytes, or base64 text.
 * `mediaType` (e.g. "image/png") is read from the bytes when not given. PNG, JPEG, GIF and WebP.
 */
export interface ImageInput {
  type: "image";
  image: string | URL | Uint8Array;
  mediaType?: string;
}

/** What a run takes as its input: text, or text and images as parts (the AI SDK's and OpenAI's shape). */
export type UserInput = string | readonly (TextInput | ImageInput)[];

export interface AssistantMessage {
  role: "assistant";
  /** The visible text of the reply ("" when the model only called tools). */
  content: string;
  /** Reasoning text the provider streamed, when it did. Never sent back unless the provider requires it. */
  thinking?: string;
  /** The provider's signature of `thinking` (Anthropic), sent back with it as the provider requires. */
  thinkingSignature?: string;
  toolCalls?: ToolCall[];
  /**
   * What an adapter attached to its reply for itself, keyed by adapter (`"openai-responses"`:
   * the encrypted reasoning items), sent back by that adapter on the next request and ignored by
   * the others. Opaque plain JSON: it is stored with the session.
   */
  providerData?: Record<string, unknown>;
}

/** The result of one tool call; `toolCallId` ties it to its call. */
export interface ToolMessage {
  role: "tool";
  toolCallId: string;
  name: string;
  content: string;
  isError: boolean;
  /**
   * Images and audio the tool returned (an MCP tool's image content, a local tool's `toolOutput`).
   * `content` names each with a placeholder such as `[image: image/png, 2.1 KB]`.
   */
  media?: MediaPart[];
}

/** History never holds the system prompt: the loop assembles it for every request. */
export type Message = UserMessage | AssistantMessage | ToolMessage;

export interface Usage {
  inputTokens: number;
  outputTokens: number;
  /** Input tokens served from the provider's prompt cache, when reported. */
  cachedInputTokens?: number;
  /** Output tokens spent on reasoning, when reported. */
  reasoningTokens?: number;
  /** Cost in USD, when the model's price is known. */
  costUsd?: number;
}

export function emptyUsage(): Usage {
  return { inputTokens: 0, outputTokens: 0 };
}

/** Adds `b` into `a` in place (the run's running total). */
export function addUsage(a: Usage, b: Usage): void {
  a.inputTokens += b.inputTokens;
  a.outputTokens += b.outputTokens;
  if (b.cachedInputTokens !== undefined)
    a.cachedInputTokens = (a.cachedInputTokens ?? 0) + b.cachedInputTokens;
  if (b.reasoningTokens !== undefined) a.reasoningTokens = (a.reasoningTokens ?? 0) + b.reasoningTokens;
  if (b.costUsd !== undefined) a.costUsd = (a.costUsd ?? 0) + b.costUsd;
}

/** `text.trim()`, without a call or a copy when both ends are visible ASCII (most argument texts). */
export function trimmed(text: string): string {
  const last = text.length - 1;
  if (last < 0) return text;
  const a = text.charCodeAt(0);
  const b = text.charCodeAt(last);
  return a > 32 && a < 127 && b > 32 && b < 127 ? text : text.trim();
}

/**
 * The deepest nesting of arrays and objects accepted in tool-call arguments. Deeper arguments
 * (which no tool needs, and which overflow the stack of anything recursive, `JSON.stringify`
 * included) never reach a tool, an event or a request: the call gets an error result instead.
 */
const MAX_ARGUMENT_DEPTH = 64;

/**
 * Whether `value`, a JSON text or a parsed value, nests arrays and objects deeper than
 * `MAX_ARGUMENT_DEPTH`. Iterative: safe at any depth; stops at the first level too deep.
 */
export function nestedTooDeep(value: unknown): boolean {
  if (typeof value === "string") {
    // Each level opens a bracket: a text this short cannot nest too deep.
    if (value.length <= MAX_ARGUMENT_DEPTH) return false;
    let depth = 0;
    let inString = false;
    for (let i = 0; i < value.length; i++) {
      const c = value.charCodeAt(i);
      if (inString) {
        if (c === 92)
          i++; // backslash: skip the escaped character
        else if (c === 34) inString = false;
      } else if (c === 34) inString = true;
      else if (c === 123 || c === 91) {
        if (++depth > MAX_ARGUMENT_DEPTH) return true;
      } else if (c === 125 || c === 93) depth--;
    }
    return false;
  }
  const stack: [unknown, number][] = [[value, 1]];
  for (let next = stack.pop(); next; next = stack.pop()) {
    const [node, depth] = next;
    if (typeof node !== "object" || node === null) continue;
    if (depth > MAX_ARGUMENT_DEPTH) return true;
    for (const child of Object.values(node)) {
      if (typeof child === "object" && child !== null) stack.push([child, depth + 1]);
    }
  }
  return false;
}

/** The error result of a call whose arguments are nested too deep (see `nestedTooDeep`). */
export function tooDeepMessage(toolName: string): string {
  return `The arguments of '${toolName}' are nested deeper than ${MAX_ARGUMENT_DEPTH} levels: send flatter arguments.`;
}
