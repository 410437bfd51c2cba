import { AgentloopError } from "../core/errors.js";
import type { Message, UserMessage } from "../core/messages.js";
import type { Model, ToolSpec } from "../models/adapter.js";
import { transcript } from "./compaction.js";
import {
  keptFree,
  learnOverhead,
  newOverhead,
  noteCount,
  OVERHEAD_MARGIN,
  type Overhead,
} from "./overhead.js";
import {
  contextWindowFor,
  countSystem,
  countTools,
  type TokenCounter,
  tokenCounterFor,
  truncateToTokens,
  upperBoundsOf,
} from "./tokens.js";

export interface ContextOptions {
  /** Picks the tokenizer ({@link tokenCounterFor}) and the default context window. */
  modelId: string;
  /** The limit every request stays under: the model's window when known ({@link contextWindowFor}), else 100,000. */
  maxContextTokens?: number;
  /** Tokens of `maxContextTokens` kept free for the answer. Default min(8192, 15% of `maxContextTokens`). */
  reserveTokens?: number;
  /** What stands where older messages were removed: a notice ("drop", the default) or a model-written summary. */
  strategy?: "drop" | "summarize";
  /** The model that writes summaries (pass the agent's own for the default). Without one, "summarize" drops. */
  summarizer?: Model;
  /**
   * When pruning, the kept messages shrink to (1 - headroom) of the room left, so the cut moves once
   * every few iterations rather than every one: the sent prefix stays byte-identical (provider
   * prompt caches hit) and summaries are rare. Default 0.2; 0 keeps as much as fits.
   */
  headroom?: number;
  /** Max tokens of one tool result. Default a quarter of `budget`. */
  maxToolResultTokens?: number;
  /** Default `tokenCounterFor(modelId)`. */
  counter?: TokenCounter;
}

/**
 * Keeps every model request under a token budget. One manager serves any number of runs: its
 * state is kept per history array (weakly), and calls for one history must not overlap.
 */
export interface ContextManager {
  /** Tokens for system prompt + tool definitions + messages: `maxContextTokens - reserveTokens`. */
  readonly budget: number;
  /** Max tokens of one tool result; {@link ContextManager.truncateToolResult} cuts beyond it. */
  readonly maxToolResultTokens: number;
  /**
   * The messages to send with `system` and `tools`, shaped to fit the budget. Never throws.
   *
   * - Returns `history` itself while everything fits (no copy).
   * - Else: the messages through the first user message (the task), then one user message standing
   *   for the removed span (`[N earlier messages omitted to fit the context window]`, or
   *   `[Summary of N earlier messages: ...]`), then the newest messages, in order. Only whole turns
   *   go: the kept part starts at a message that is not a tool result, so an assistant message with
   *   tool calls always travels with all of its results (which follow it, as the loop appends them).
   * - If even the task, the notice and the newest turn do not fit, those are sent anyway: the newest
   *   message is never dropped.
   *
   * `history` must be append-only between calls (the same array, growing); a history that was
   * rewritten is detected and recounted. Each message is counted once, and the cut point only moves
   * forward: a call costs O(new messages + log n). The returned array may grow on later calls for
   * the same history, the way `history` does. The summarizer call honours `signal`.
   */
  fit(
    history: readonly Message[],
    system: string,
    tools: readonly ToolSpec[],
    signal?: AbortSignal,
  ): Promise<readonly Message[]>;
  /** `content` cut to `maxToolResultTokens` with a visible marker; `content` itself when it fits. */
  truncateToolResult(content: string): string;
}

const DEFAULT_CONTEXT_TOKENS = 100_000;

/** Per-history state. `prefix[i]` is the token count of `history[0..i)`, each message counted once. */
interface Window {
  prefix: number[];
  /** The last counted message: if it is not where it was, the history was rewritten. */
  last: Message | undefined;
  taskFound: boolean;
  /** `history[0..head)` is always sent: everything through the first user message. */
  head: number;
  /** The newest index at or after `head` that may start the kept part (not a tool result); -1 for none. */
  lastCut: number;
  /** The kept part starts here; `cut === head` while nothing is removed. */
  cut: number;
  sent: Message[];
  sentUpTo: number;
  noticeTokens: number;
  /** A summary of `history[head..upTo)`. */
  summary?: { text: string; upTo: number };
}

/**
 * What is sent of a run's history, decided just before each model request (`AgentOptions.context`).
 * `history` is the run's whole history, append-only: read it, do not change it. Returns the
 * messages to send: `history` itself, a part of it, or new messages (a summary, retrieved notes).
 * The run's history stays whole. Must not throw: a throw or a rejection ends the run by rejecting
 * its `result`.
 */
export type ContextTransform = (
  history: readonly Message[],
  request: { system: string; tools: readonly ToolSpec[]; signal?: AbortSignal | undefined },
) => readonly Message[] | Promise<readonly Message[]>;

/** The managers `contextManager` made: the loop uses their per-run `shape` directly. */
const managers = new WeakSet<ContextManager>();

export function contextManager(options: ContextOptions): ContextManager {
  const manager = loopContext(options);
  managers.add(manager);
  return manager;
}

/**
 * The loop's view of `AgentOptions.context`: a manager `contextManager` made as it is; any other
 * manager through its `fit` and `truncateToolResult`; a transform as the whole shaping (tool
 * results are then cut by `maxToolResultChars` only).
 */
export function loopContextOf(context: ContextManager | ContextTransform): LoopContext {
  if (typeof context === "function") {
    const shape = (
      history: readonly Message[],
      system: string,
      tools: readonly ToolSpec[],
      signal?: AbortSignal,
    ) => context(history, { system, tools, signal });
    return {
      budget: Number.POSITIVE_INFINITY,
      maxToolResultTokens: Number.POSITIVE_INFINITY,
      fit: async (history, system, tools, signal) => shape(history, system, tools, signal),
      truncateToolResult: (content) => content,
      shape,
    };
  }
  if (managers.has(context)) return context as LoopContext;
  return {
    get budget() {
      return context.budget;
    },
    get maxToolResultTokens() {
      return context.maxToolResultTokens;
    },
    fit: (history, system, tools, signal) => context.fit(history, system, tools, signal),
    truncateToolResult: (content) => context.truncateToolResult(content),
    shape: (history, system, tools, signal) => context.fit(history, system, tools, signal),
  };
}

/** The context manager as the loop uses it (not exported from the package). */
export interface LoopContext extends ContextManager {
  /**
   * `fit` for one run: its counts live in `memo` (one per run, from `newContextMemo()`), not in the
   * manager's weak map, and there is no promise unless a summary must be written. `reported`: the
   * prompt tokens the provider reported for the run's previous request (the one the last `shape`
   * gave), from which the run learns what the server adds to our count (a chat template wrapped
   * around the tool schemas): the requests that follow keep that much more room free, and so do the
   * first requests of the runs that follow (of this context, i.e. this agent). Until a run has
   * learned it, a margin of `OVERHEAD_MARGIN` of the budget is kept instead.
   */
  shape(
    history: readonly Message[],
    system: string,
    tools: readonly ToolSpec[],
    signal: AbortSignal | undefined,
    memo: ContextMemo,
    reported?: number,
  ): readonly Message[] | Promise<readonly Message[]>;
  /** What compaction counts with; only the built-in manager (`contextManager`, the default) has it. */
  compaction?: CompactionCounts;
}

/** Compaction's view of a run's counts (agent/compact.ts). */
export interface CompactionCounts {
  counter: TokenCounter;
  /** The most tokens a request of this run may have at fraction `at` of `maxContextTokens`: never more than pruning allows. */
  threshold(memo: ContextMemo, at: number): number;
  /**
   * The request's tokens (the fixed part and `history`) when they pass `threshold(memo, at)`, else
   * -1: from the run's counts in `memo`, which the iteration's `shape` then reuses (amortised O(1)).
   */
  over(
    history: readonly Message[],
    system: string,
    tools: readonly ToolSpec[],
    memo: ContextMemo,
    at: number,
  ): number;
  /** The tokens of a request of `messages`, `system` and `tools`, counted afresh (O(messages)). */
  count(messages: readonly Message[], system: string, tools: readonly ToolSpec[]): number;
}

/** An upper bound of a history's tokens (`upTo` messages counted) and of the last fixed part's. */
interface Bound {
  history: readonly Message[];
  /** Which of the bounds counted `total` (the looser ones failed). */
  level: number;
  total: number;
  upTo: number;
  last: Message | undefined;
  system: string | undefined;
  tools: readonly ToolSpec[] | undefined;
  fixed: number;
}

/** What one run keeps between its model calls: its history's counts and the last fixed part's. */
export interface ContextMemo {
  bound: Bound | undefined;
  history: readonly Message[] | undefined;
  window: Window | undefined;
  system: string | undefined;
  tools: readonly ToolSpec[] | undefined;
  fixed: number;
  /** What the server adds to our count of a request, as this run learned it. */
  overhead: Overhead;
}

/** An empty memo, every field in place (one object shape for every run). */
export function newContextMemo(): ContextMemo {
  return {
    bound: undefined,
    history: undefined,
    window: undefined,
    system: undefined,
    tools: undefined,
    fixed: 0,
    overhead: newOverhead(),
  };
}

export function loopContext(options: ContextOptions): LoopContext {
  const counter = options.counter ?? tokenCounterFor(options.modelId);
  const maxContext = options.maxContextTokens ?? contextWindowFor(options.modelId) ?? DEFAULT_CONTEXT_TOKENS;
  const reserve = options.reserveTokens ?? Math.min(8192, Math.floor(maxContext * 0.15));
  const budget = maxContext - reserve;
  if (!(budget > 0) || !(reserve >= 0)) {
    throw new AgentloopError(
      "config",
      `maxContextTokens ${maxContext} leaves no room after reserving ${reserve} tokens for the answer: raise it.`,
    );
  }
  const headroom = Math.min(0.9, Math.max(0, options.headroom ?? 0.2));
  const maxToolResultTokens = options.maxToolResultTokens ?? Math.floor(budget / 4);
  const summarizer = options.strategy === "summarize" ? options.summarizer : undefined;
  const summaryTokens = Math.min(2_000, Math.floor(budget / 10));
  const margin = Math.ceil(budget * OVERHEAD_MARGIN);
  // The server's overhead as the agent's runs last learned it (-1 until one has): a run starts
  // with it rather than with the margin, so a chat's next turn, which starts with the longest
  // history, keeps free what the previous turn showed.
  let serverOverhead = -1;
  const windows = new WeakMap<readonly Message[], Window>();
  const boundCounters = upperBoundsOf(counter);
  const bounds = new WeakMap<readonly Message[], Bound>();
  const toolBounds = new WeakMap<readonly ToolSpec[], number[]>();

  // Until a history comes near the budget, an upper bound of its tokens (see upperBoundsOf) shows
  // that it fits: no exact count, so the tokenizer loads only for the first request that could
  // need pruning. When a bound fails the next, tighter one counts the history again; once the
  // last fails, the exact count takes over for good (a Window exists).
  function fitsByBound(
    history: readonly Message[],
    system: string,
    tools: readonly ToolSpec[],
    memo: ContextMemo | undefined,
    limit: number,
  ): boolean {
    let b: Bound | undefined;
    if (memo) {
      if (memo.window && memo.history === history) return false;
      b = memo.bound;
    } else {
      if (windows.has(history)) return false;
      b = bounds.get(history);
    }
    if (
      !b ||
      b.history !== history ||
      b.upTo > history.length ||
      (b.upTo > 0 && history[b.upTo - 1] !== b.last)
    ) {
      b = {
        history,
        level: 0,
        total: 0,
        upTo: 0,
        last: undefined,
        system: undefined,
        tools: undefined,
        fixed: 0,
      };
      if (memo) memo.bound = b;
      else bounds.set(history, b);
    }
    for (; b.level < boundCounters.length; b.level++) {
      const bound = boundCounters[b.level] as TokenCounter;
      if (b.upTo === 0 || b.system !== system || b.tools !== tools) {
        b.system = system;
        b.tools = tools;
        b.fixed = countSystem(system, bound) + toolTokens(tools, b.level);
      }
      for (; b.upTo < history.length; b.upTo++) b.total += bound.countMessage(history[b.upTo] as Message);
      b.last = history[b.upTo - 1];
      if (b.fixed + b.total <= limit) {
        if (memo) noteCount(memo.overhead, b.fixed + b.total, true);
        return true;
      }
      b.total = 0;
      b.upTo = 0;
    }
    return false;
  }

  function resultFitsByBound(content: string): boolean {
    for (const bound of boundCounters) if (bound.count(content) <= maxToolResultTokens) return true;
    return false;
  }

  /** The tool definitions by bound `level`, counted once per tool list. */
  function toolTokens(tools: readonly ToolSpec[], level: number): number {
    let counts = toolBounds.get(tools);
    if (!counts) {
      counts = [];
      toolBounds.set(tools, counts);
    }
    counts[level] ??= countTools(tools, boundCounters[level] as TokenCounter);
    return counts[level];
  }
  const toolCounts = new WeakMap<readonly ToolSpec[], number>();
  const systemCounts = new Map<string, number>();

  // The system prompt and tool list are byte-identical between iterations: count each once.
  function fixedTokens(system: string, tools: readonly ToolSpec[]): number {
    let systemTokens = systemCounts.get(system);
    if (systemTokens === undefined) {
      if (systemCounts.size >= 64) systemCounts.clear();
      systemTokens = countSystem(system, counter);
      systemCounts.set(system, systemTokens);
    }
    let toolTokens = toolCounts.get(tools);
    if (toolTokens === undefined) {
      toolTokens = countTools(tools, counter);
      toolCounts.set(tools, toolTokens);
    }
    return systemTokens + toolTokens;
  }

  function windowFor(history: readonly Message[], memo: ContextMemo | undefined): Window {
    let w = memo ? (memo.history === history ? memo.window : undefined) : windows.get(history);
    const counted = w ? w.prefix.length - 1 : 0;
    if (!w || counted > history.length || (counted > 0 && history[counted - 1] !== w.last)) {
      w = {
        prefix: [0],
        last: undefined,
        taskFound: false,
        head: 0,
        lastCut: -1,
        cut: 0,
        sent: [],
        sentUpTo: 0,
        noticeTokens: 0,
      };
      if (!memo) windows.set(history, w);
      else {
        memo.history = history;
        memo.window = w;
      }
    }
    for (let i = w.prefix.length - 1; i < history.length; i++) {
      const message = history[i] as Message;
      w.prefix.push(at(w.prefix, i) + counter.countMessage(message));
      w.last = message;
      if (!w.taskFound && message.role === "user") {
        w.taskFound = true;
        w.head = i + 1;
        w.cut = Math.max(w.cut, w.head);
        w.summary = undefined;
      } else if (message.role !== "tool") w.lastCut = i;
    }
    return w;
  }

  function noticeFor(w: Window, cut: number): UserMessage {
    const { summary } = w;
    const parts: string[] = [];
    if (summary) parts.push(`[Summary of ${summary.upTo - w.head} earlier messages: ${summary.text}]`);
    const omitted = cut - (summary?.upTo ?? w.head);
    if (omitted > 0 || !summary) parts.push(omittedNotice(omitted));
    return { role: "user", content: parts.join("\n") };
  }

  // One summarizer call for the span the summary does not cover yet, folding in the summary so far.
  // Any failure leaves the summary as it was: the uncovered span is then reported as omitted.
  async function summarize(w: Window, history: readonly Message[], cut: number, signal?: AbortSignal) {
    if (!summarizer || (w.summary?.upTo ?? w.head) >= cut) return;
    const previous = w.summary ? `Summary so far:\n${w.summary.text}\n\n` : "";
    const input = truncateToTokens(
      `${previous}Conversation to add:\n${transcript(history, w.summary?.upTo ?? w.head, cut)}`,
      budget,
      counter,
    );
    const words = Math.max(20, Math.floor(summaryTokens * 0.6));
    const system =
      "You compress the earlier part of an agent's conversation so it can continue its task without it. " +
      "Keep facts learned, decisions, tool results that still matter, errors to avoid and what remains to do. " +
      `Reply with the summary only, at most ${words} words.`;
    try {
      let text = "";
      const request = { system, messages: [{ role: "user" as const, content: input }], tools: [] };
      for await (const event of summarizer.stream(request, { signal })) {
        if (event.type === "done") text = event.message.content.trim();
        else if (event.type === "error") return;
      }
      if (text) w.summary = { text: truncateToTokens(text, summaryTokens, counter), upTo: cut };
    } catch {
      // The Model contract says stream never throws; a summarizer that does still only costs the summary.
    }
  }

  /** The first cut at or after `from` that starts a turn, but never past the newest one. */
  function turnStart(history: readonly Message[], w: Window, from: number): number {
    let cut = from;
    while (cut < history.length && history[cut]?.role === "tool") cut++;
    return Math.min(cut, w.lastCut);
  }

  return {
    budget,
    maxToolResultTokens,
    truncateToolResult: (content: string) =>
      resultFitsByBound(content) ? content : truncateToTokens(content, maxToolResultTokens, counter),

    fit: async (history, system, tools, signal) => shape(history, system, tools, signal, undefined),
    shape,
    compaction: {
      counter,
      threshold,
      over(history, system, tools, memo, fraction) {
        const limit = threshold(memo, fraction);
        if (fitsByBound(history, system, tools, memo, limit)) return -1;
        const w = windowFor(history, memo);
        const total = fixedTokens(system, tools) + at(w.prefix, history.length);
        return total > limit ? total : -1;
      },
      count(messages, system, tools) {
        let total = fixedTokens(system, tools);
        for (const message of messages) total += counter.countMessage(message);
        return total;
      },
    },
  };

  function threshold(memo: ContextMemo, fraction: number): number {
    const overhead = memo.overhead;
    const learned = overhead.learned < 0 ? serverOverhead : overhead.learned;
    const free = learned < 0 ? margin : learned;
    return Math.min(Math.floor(fraction * maxContext), budget - free);
  }

  function shape(
    history: readonly Message[],
    system: string,
    tools: readonly ToolSpec[],
    signal: AbortSignal | undefined,
    memo: ContextMemo | undefined,
    reported?: number,
  ): readonly Message[] | Promise<readonly Message[]> {
    let limit = budget;
    if (memo) {
      const overhead = memo.overhead;
      if (overhead.learned < 0) overhead.learned = serverOverhead;
      learnOverhead(overhead, reported, margin);
      serverOverhead = overhead.learned;
      limit -= keptFree(overhead, margin);
    }
    if (fitsByBound(history, system, tools, memo, limit)) return history;
    const w = windowFor(history, memo);
    const n = history.length;
    const total = at(w.prefix, n);
    let fixed: number;
    if (memo?.system === system && memo.tools === tools) fixed = memo.fixed;
    else {
      fixed = fixedTokens(system, tools);
      if (memo) {
        memo.system = system;
        memo.tools = tools;
        memo.fixed = fixed;
      }
    }
    const room = limit - fixed - at(w.prefix, w.head);
    const counted = limit - room; // the fixed part and the head
    if (w.cut === w.head) {
      if (total - at(w.prefix, w.head) <= room || w.lastCut <= w.head) {
        if (memo) noteCount(memo.overhead, counted + total - at(w.prefix, w.head), false);
        return history;
      }
    } else if (w.noticeTokens + total - at(w.prefix, w.cut) <= room || w.cut === w.lastCut) {
      if (memo) noteCount(memo.overhead, counted + w.noticeTokens + total - at(w.prefix, w.cut), false);
      return extend(w, history);
    }

    // Over budget: keep the newest messages that fit in the room left after the notice (with
    // headroom), found by binary search on the prefix sums, then round up to a turn start.
    let reserve = counter.countMessage({ role: "user", content: omittedNotice(n) });
    if (summarizer) reserve += summaryTokens + counter.count(`[Summary of ${n} earlier messages: ]\n`);
    const target = Math.floor((room - reserve) * (1 - headroom));
    const cut = turnStart(history, w, firstAtLeast(w.prefix, total - target, Math.max(w.cut, w.head + 1), n));
    if (summarizer && (w.summary?.upTo ?? w.head) < cut) {
      return summarize(w, history, cut, signal).then(() => place(w, history, cut, room, memo, counted));
    }
    return place(w, history, cut, room, memo, counted);
  }

  /** Moves the cut on until the notice and the kept messages fit; the sent array starts over. */
  function place(
    w: Window,
    history: readonly Message[],
    from: number,
    room: number,
    memo: ContextMemo | undefined,
    /** Tokens of the fixed part and the head, for the memo's count of the request. */
    base: number,
  ): readonly Message[] {
    const n = history.length;
    const kept = (cut: number) => at(w.prefix, n) - at(w.prefix, cut);
    let cut = from;
    let notice = noticeFor(w, cut);
    let noticeTokens = counter.countMessage(notice);
    while (noticeTokens + kept(cut) > room && cut < w.lastCut) {
      cut = turnStart(history, w, cut + 1);
      notice = noticeFor(w, cut);
      noticeTokens = counter.countMessage(notice);
    }
    w.cut = cut;
    w.noticeTokens = noticeTokens;
    if (memo) noteCount(memo.overhead, base + noticeTokens + kept(cut), false);
    w.sent = [...history.slice(0, w.head), notice, ...history.slice(cut, n)];
    w.sentUpTo = n;
    return extend(w, history);
  }
}

function omittedNotice(count: number): string {
  return `[${count} earlier messages omitted to fit the context window]`;
}

function extend(w: Window, history: readonly Message[]): readonly Message[] {
  for (let i = w.sentUpTo; i < history.length; i++) w.sent.push(history[i] as Message);
  w.sentUpTo = history.length;
  return w.sent;
}

function at(values: readonly number[], index: number): number {
  return values[index] as number;
}

/** The smallest index in [lo, hi] whose value is at least `value` (`hi` if none); `sorted` is non-decreasing. */
function firstAtLeast(sorted: readonly number[], value: number, lo: number, hi: number): number {
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (at(sorted, mid) >= value) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}
