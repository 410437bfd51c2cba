import { createRequire } from "node:module";
import type { Message } from "../core/messages.js";
import type { ToolSpec } from "../models/adapter.js";

/**
 * Counts tokens the way a model's request is billed against its context window.
 * Contract: never throws (text that looks like a special token, e.g. "<|endoftext|>", counts as
 * plain text), and is deterministic: the same input always gives the same count.
 */
export interface TokenCounter {
  /** Tokens in `text`. */
  count(text: string): number;
  /**
   * Tokens one message costs in a request: its content, its tool calls (name + arguments), the
   * result's tool name, {@link MEDIA_TOKENS} per image or audio clip, and a per-message overhead
   * ({@link MESSAGE_OVERHEAD}).
   */
  countMessage(message: Message): number;
}

/** Framing tokens per message (role, separators), as OpenAI's chat format spends them. */
export const MESSAGE_OVERHEAD = 4;
/** Framing tokens per tool call and per tool definition. */
const ITEM_OVERHEAD = 3;
/** Tokens that prime the reply in every request. */
const REQUEST_OVERHEAD = 3;
/**
 * Tokens one image or audio clip is counted as, whatever its size: about the most either provider
 * bills for one image after its own downscaling (Anthropic about 1,600 for a 1.15-megapixel image,
 * OpenAI 765 to 1,105 at high detail). Errs high, like the text estimate; base64 is never counted.
 */
export const MEDIA_TOKENS = 1_600;

/** A counter from a text-counting function; the message framing is added for you. */
export function createTokenCounter(count: (text: string) => number): TokenCounter {
  return {
    count,
    countMessage(message) {
      let tokens = MESSAGE_OVERHEAD + count(message.content);
      if (message.role === "tool")
        return tokens + count(message.name) + MEDIA_TOKENS * (message.media?.length ?? 0);
      if (message.role === "user") return tokens + MEDIA_TOKENS * (message.media?.length ?? 0);
      for (const call of message.toolCalls ?? [])
        tokens += ITEM_OVERHEAD + count(call.name) + count(call.arguments);
      // Thinking goes back to the provider only when it is signed (Anthropic); else it is not sent.
      if (message.thinking && message.thinkingSignature) tokens += count(message.thinking);
      return tokens;
    },
  };
}

/**
 * A cheap estimate for models whose tokenizer we do not ship: about 4 ASCII characters per token,
 * 2 per token for other alphabets (Cyrillic, Greek, accented Latin...), 1 for CJK and beyond.
 * Errs high for non-English text rather than overflowing the window.
 */
export function estimateTokens(text: string): number {
  let quarters = 0;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    quarters += code < 0x80 ? 1 : code < 0x3000 ? 2 : 4;
  }
  return Math.ceil(quarters / 4);
}

const estimateCounter = createTokenCounter(estimateTokens);

type Encoding = "o200k_base" | "cl100k_base";
type EncodingModule = typeof import("gpt-tokenizer/encoding/o200k_base");
const encodingCounters = new Map<Encoding, TokenCounter>();
const asPlainText = { disallowedSpecial: new Set<string>() };

/** One token per UTF-8 byte: at least what a byte-level BPE tokenizer counts (each token is a byte or more). */
const utf8Counter = createTokenCounter((text) => Buffer.byteLength(text, "utf8"));
/** One token per UTF-16 unit: at least the estimate (which counts at most one per unit). */
const lengthCounter = createTokenCounter((text) => text.length);
/** Three tokens per UTF-16 unit: at least the UTF-8 bytes (a unit is at most three). */
const triple = createTokenCounter((text) => 3 * text.length);

/**
 * Cheap counters that never count less than `counter` (message by message), loosest and
 * cheapest first, so a request that fits by one needs no exact count: for the estimate, one
 * token per character (no scan) and then the estimate itself; for the built-in tokenizers, three
 * per character, then one per UTF-8 byte (their ranks, megabytes, then load only for a request
 * near the budget). Empty for other counters.
 */
export function upperBoundsOf(counter: TokenCounter): readonly TokenCounter[] {
  if (counter === estimateCounter) return [lengthCounter];
  for (const encodingCounter of encodingCounters.values())
    if (encodingCounter === counter) return [triple, utf8Counter];
  return [];
}

/** One shared counter per encoding; its ranks (megabytes) load on the first count, not before. */
function encodingCounter(encoding: Encoding): TokenCounter {
  let counter = encodingCounters.get(encoding);
  if (!counter) {
    let module: EncodingModule | undefined;
    counter = createTokenCounter((text) => {
      if (text === "") return 0;
      module ??= createRequire(import.meta.url)(`gpt-tokenizer/encoding/${encoding}`) as EncodingModule;
      return module.countTokens(text, asPlainText);
    });
    encodingCounters.set(encoding, counter);
  }
  return counter;
}

/** "openai/gpt-4o-mini" and "GPT-4o" both become "gpt-4o-mini" / "gpt-4o": routers prefix, users capitalise. */
function baseId(modelId: string): string {
  return modelId.slice(modelId.lastIndexOf("/") + 1).toLowerCase();
}

function encodingFor(id: string): Encoding | undefined {
  if (/^(gpt-4o|gpt-4\.1|gpt-4\.5|gpt-5|gpt-oss|o1|o3|o4|chatgpt-4o)/.test(id)) return "o200k_base";
  if (/^(gpt-4|gpt-3\.5)/.test(id)) return "cl100k_base";
  return undefined;
}

/**
 * The counter for a model: the real tokenizer for OpenAI models (o200k_base for gpt-4o, gpt-4.1,
 * gpt-5, o1/o3/o4, chatgpt-4o; cl100k_base for gpt-4 and gpt-3.5), else {@link estimateTokens}.
 * The estimate path loads no tokenizer. Counters are shared: call it as often as you like.
 */
export function tokenCounterFor(modelId: string): TokenCounter {
  const encoding = encodingFor(baseId(modelId));
  return encoding ? encodingCounter(encoding) : estimateCounter;
}

/** Context windows (input + output tokens) by model-id prefix; the longest matching prefix wins. */
const WINDOWS: readonly (readonly [prefix: string, tokens: number])[] = (
  [
    ["gpt-4o", 128_000],
    ["chatgpt-4o", 128_000],
    ["gpt-4.1", 1_047_576],
    ["gpt-4.5", 128_000],
    ["gpt-4-turbo", 128_000],
    ["gpt-4-32k", 32_768],
    ["gpt-4", 8_192],
    ["gpt-3.5-turbo", 16_385],
    ["gpt-5", 400_000],
    ["gpt-oss", 131_072],
    ["o1", 200_000],
    ["o1-mini", 128_000],
    ["o1-preview", 128_000],
    ["o3", 200_000],
    ["o4-mini", 200_000],
    ["claude-", 200_000],
    ["gemini-", 1_048_576],
    ["llama3.1", 131_072],
    ["llama3.2", 131_072],
    ["llama3.3", 131_072],
    ["llama-3.1", 131_072],
    ["llama-3.2", 131_072],
    ["llama-3.3", 131_072],
    ["llama3", 8_192],
    ["qwen2.5", 32_768],
    ["qwen3", 32_768],
    ["mistral", 32_768],
    ["mistral-large", 128_000],
    ["mistral-nemo", 128_000],
    ["deepseek", 128_000],
    ["gemma3", 131_072],
  ] as const
).toSorted((a, b) => b[0].length - a[0].length);

/** The model's context window when this small table knows it (prefix match on the id), else undefined. */
export function contextWindowFor(modelId: string): number | undefined {
  const id = baseId(modelId);
  return WINDOWS.find(([prefix]) => id.startsWith(prefix))?.[1];
}

/** Tokens the tool definitions cost in a request: names, descriptions and JSON Schemas. 0 for none. */
export function countTools(tools: readonly ToolSpec[], counter: TokenCounter): number {
  let tokens = 0;
  for (const tool of tools) {
    tokens += ITEM_OVERHEAD + counter.count(tool.name) + counter.count(tool.description);
    tokens += counter.count(JSON.stringify(tool.parameters));
  }
  return tokens;
}

/** Tokens of the system prompt plus the per-request framing: the part of a request that is not history. */
export function countSystem(system: string, counter: TokenCounter): number {
  return REQUEST_OVERHEAD + (system === "" ? 0 : MESSAGE_OVERHEAD + counter.count(system));
}

/**
 * `text` cut to at most `maxTokens` tokens, marker included: the beginning of the text, then
 * "[... truncated: the full text has N tokens]". Returns `text` itself when it fits. Costs a few
 * counts of the text (the cut shrinks in proportion to the overshoot), not one per character.
 */
export function truncateToTokens(text: string, maxTokens: number, counter: TokenCounter): string {
  const total = counter.count(text);
  if (total <= maxTokens) return text;
  const marker = `\n[... truncated: the full text has ${total} tokens]`;
  const room = maxTokens - counter.count(marker);
  if (room <= 0) return counter.count("[truncated]") <= maxTokens ? "[truncated]" : "";
  let length = Math.floor((text.length * room) / total);
  for (;;) {
    // A lone high surrogate at the end would be an invalid character.
    const code = text.charCodeAt(length - 1);
    if (code >= 0xd800 && code <= 0xdbff) length--;
    const result = text.slice(0, length) + marker;
    const tokens = counter.count(result);
    if (tokens <= maxTokens || length === 0) return result;
    length = Math.min(length - 1, Math.floor((length * room) / (tokens - (maxTokens - room))));
  }
}
