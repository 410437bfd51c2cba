/**
 * Compaction by summary (SPEC section 13), as data: which messages a summary replaces, the
 * history with the summary in their place, the summarisation request, and the history a stored
 * log stands for. The loop's stage that runs it is agent/compact.ts.
 */
import { AgentloopError } from "../core/errors.js";
import { describeMedia } from "../core/media.js";
import type { MediaPart, Message, Usage, UserMessage } from "../core/messages.js";
import type { Model, ModelError, ModelReply, ModelRequest } from "../models/adapter.js";
import { type TokenCounter, truncateToTokens } from "./tokens.js";

/** The `compaction` option of an agent (config `"compaction"`, `--compact`). */
export interface CompactionOptions {
  /**
   * Compact when the next request would pass this fraction of `maxContextTokens` (and at the
   * latest when it would otherwise be pruned). In (0, 1]; default 0.8.
   */
  at?: number;
  /** The model that writes the summaries. Default: the agent's model. */
  model?: Model;
}

const DEFAULT_COMPACTION_AT = 0.8;

/**
 * `at` checked: a number in (0, 1], or the default.
 * @throws AgentloopError("invalid_option") naming `name` otherwise.
 */
export function compactionAt(at: unknown, name = "compaction.at"): number {
  if (at === undefined) return DEFAULT_COMPACTION_AT;
  if (typeof at !== "number" || !(at > 0 && at <= 1)) {
    throw new AgentloopError(
      "invalid_option",
      `${name} must be a number in (0, 1] (a fraction of maxContextTokens, e.g. 0.8), got ${JSON.stringify(at)}.`,
    );
  }
  return at;
}

/** Which messages one compaction replaces: `history[0..cut)`, except `keep` (the latest user message) when it is one of them. */
export interface CompactionPlan {
  cut: number;
  /** Index of the latest user message when it lies before `cut` (it stays, before the summary); else -1. */
  keep: number;
  /** How many messages the summary stands for. */
  replaced: number;
}

/** The index of the latest user message before `end` that is not a summary; -1 for none. */
export function latestUser(history: readonly Message[], end = history.length): number {
  for (let i = end - 1; i >= 0; i--) {
    const message = history[i] as Message;
    if (message.role === "user" && !message.compaction) return i;
  }
  return -1;
}

/** Where the newest turn starts: the last message that is not a tool result (0 for none). */
export function newestTurn(history: readonly Message[]): number {
  for (let i = history.length - 1; i >= 0; i--) if ((history[i] as Message).role !== "tool") return i;
  return 0;
}

/**
 * The plan for replacing what comes before `cut`, moved on to a turn start (never between a tool
 * call and its results); undefined when nothing new would be summarised (at most one earlier
 * summary would be replaced by another).
 */
export function planAt(history: readonly Message[], cut: number): CompactionPlan | undefined {
  let at = Math.min(Math.max(cut, 0), history.length);
  while (at < history.length && (history[at] as Message).role === "tool") at++;
  const user = latestUser(history);
  const keep = user >= 0 && user < at ? user : -1;
  const replaced = at - (keep >= 0 ? 1 : 0);
  if (replaced < 1) return undefined;
  if (replaced === 1 && isSummary(history[keep === 0 ? 1 : 0])) return undefined;
  return { cut: at, keep, replaced };
}

const isSummary = (message: Message | undefined): boolean =>
  message?.role === "user" && message.compaction !== undefined;

/** The summary message that stands for `replaced` messages, `kept` newer ones following it. */
export function summaryMessage(text: string, replaced: number, kept: number): UserMessage {
  return {
    role: "user",
    content: `[Summary of the ${replaced} earlier messages of this conversation, which were compacted]\n${text}`,
    compaction: { replaced, kept },
  };
}

/** The history with the plan's messages replaced by `summary` (a new array; the kept messages are the same objects). */
export function applyPlan(
  history: readonly Message[],
  plan: CompactionPlan,
  summary: UserMessage,
): Message[] {
  const out: Message[] = [];
  if (plan.keep >= 0) out.push(history[plan.keep] as Message);
  out.push(summary);
  for (let i = plan.cut; i < history.length; i++) out.push(history[i] as Message);
  return out;
}

/**
 * The history a stored log stands for: each summary (`compaction`) replaces what it replaced, as
 * `applyPlan` did when it was written. A log without summaries is returned as it is.
 */
export function compactedLog(log: Message[]): Message[] {
  let found = false;
  for (const message of log) if (isSummary(message)) found = true;
  if (!found) return log;
  let out: Message[] = [];
  for (const message of log) {
    if (message.role !== "user" || !message.compaction) {
      out.push(message);
      continue;
    }
    const cut = Math.max(0, out.length - message.compaction.kept);
    const before = cut - message.compaction.replaced;
    const head =
      before === 1 ? [out[Math.max(0, latestUser(out, cut))] as Message] : out.slice(0, Math.max(0, before));
    out = [...head, message, ...out.slice(cut)];
  }
  return out;
}

/** The summarisation prompt: what a summary must keep for the agent to go on without the messages. */
function summaryInstructions(words: number): string {
  return [
    "You compact the earlier part of an AI agent's conversation: your summary replaces those messages, and the agent continues its task from it and the most recent messages alone.",
    "Write it under these headings, leaving out none that has content:",
    "1. What was asked: every request of the user, with its details and constraints.",
    "2. What was found: the results of tool calls and everything learned that still matters.",
    "3. Decisions: what was decided, and why.",
    "4. Open items: what remains to do, questions not yet answered, errors to avoid repeating.",
    "5. Facts and values: the exact numbers, names, settings, URLs and quotes the task still needs, verbatim.",
    "6. Files and ids touched: every file path, identifier and resource read, created or changed.",
    `Reply with the summary only, at most ${words} words.`,
  ].join("\n");
}

/** What one summarisation call gave: its text (empty when it failed) and usage, or why it failed. */
export interface Summary {
  text: string;
  usage: Usage | undefined;
  error: string | undefined;
}

/**
 * One model call that summarises the plan's messages. Never throws: a failed call, an empty reply or
 * a model that throws gives `error`. `inputTokens` bounds the transcript sent; `words` the summary.
 */
/** Told of the summary's model call (a run's trace: its `chat` span, SPEC sections 11 and 13). */
export interface SummaryCallObserver {
  modelCall(request: ModelRequest): void;
  modelReturned(ended: ModelReply | ModelError | undefined): void;
}

export async function summarize(
  model: Model,
  history: readonly Message[],
  plan: CompactionPlan,
  limits: { words: number; inputTokens: number; counter: TokenCounter },
  signal: AbortSignal | undefined,
  observer?: SummaryCallObserver,
): Promise<Summary> {
  const text = transcript(history, 0, plan.cut, plan.keep);
  const input = truncateToTokens(
    `Messages to summarise (${plan.replaced}):\n\n${text}`,
    limits.inputTokens,
    limits.counter,
  );
  const request = {
    system: summaryInstructions(limits.words),
    messages: [{ role: "user" as const, content: input }],
    tools: [],
  };
  observer?.modelCall(request);
  let ended: ModelReply | ModelError | undefined;
  try {
    for await (const event of model.stream(request, signal ? { signal } : {})) {
      if (event.type === "done") {
        ended = event.message;
        const content = event.message.content.trim();
        const usage = event.message.usage;
        if (!content) return { text: "", usage, error: "the summary came back empty" };
        return { text: content, usage, error: undefined };
      }
      if (event.type === "error") {
        ended = event.error;
        return { text: "", usage: undefined, error: event.error.message };
      }
    }
    return { text: "", usage: undefined, error: "the model's stream ended without a reply" };
  } catch (error) {
    // The Model contract says stream never throws; one that does still only costs the summary.
    return { text: "", usage: undefined, error: error instanceof Error ? error.message : String(error) };
  } finally {
    observer?.modelReturned(ended);
  }
}

/** Images in the transcript: their placeholders, never their bytes. */
function mediaNotes(media: readonly MediaPart[] | undefined): string {
  return media?.length ? ` ${media.map(describeMedia).join(" ")}` : "";
}

/**
 * `history[from..to)` (but `skip`) as plain text for a summariser: tool calls would need their
 * results on the wire, and images their bytes.
 */
export function transcript(history: readonly Message[], from: number, to: number, skip = -1): string {
  const lines: string[] = [];
  for (let i = from; i < to; i++) {
    if (i === skip) continue;
    const message = history[i] as Message;
    if (message.role === "user") {
      if (message.compaction) lines.push(`Earlier summary: ${message.content}`);
      else lines.push(`User: ${message.content}${mediaNotes(message.media)}`);
    } else if (message.role === "tool") {
      const kind = message.isError ? "error" : "result";
      lines.push(`Tool ${message.name} ${kind}: ${message.content}${mediaNotes(message.media)}`);
    } else {
      if (message.content) lines.push(`Assistant: ${message.content}`);
      for (const call of message.toolCalls ?? [])
        lines.push(`Assistant called ${call.name}(${call.arguments}) [id ${call.id}]`);
    }
  }
  return lines.join("\n");
}
