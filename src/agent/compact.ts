/**
 * The compaction stage of a run (SPEC section 13): when its next request would pass the threshold,
 * or the provider said the prompt does not fit, the older history becomes one summary written by
 * one model call. Per run: it reads and changes only the run's state; `runLoop` stores the result
 * as a checkpoint before the next model call and hands out the event.
 */
import { AgentloopError } from "../core/errors.js";
import type { AgentEventBody } from "../core/events.js";
import { addUsage, type Message, type Usage } from "../core/messages.js";
import type { RunState } from "../core/run-state.js";
import {
  applyPlan,
  type CompactionOptions,
  type CompactionPlan,
  compactionAt,
  latestUser,
  newestTurn,
  planAt,
  type SummaryCallObserver,
  summarize,
  summaryMessage,
} from "../memory/compaction.js";
import { type CompactionCounts, type LoopContext, loopContext, newContextMemo } from "../memory/prune.js";
import { truncateToTokens } from "../memory/tokens.js";
import type { Model, ToolSpec } from "../models/adapter.js";
import { costOf, type ModelPrice, type PriceTable, resolvePrice } from "../models/pricing.js";
import type { Run } from "./run.js";

/** Compaction as a run's loop has it (`LoopOptions.compaction`). */
export interface LoopCompaction {
  /** The fraction of `maxContextTokens` past which a request is compacted first. */
  at: number;
  model: Model;
  /** The price of `model`, when known: the summary's cost counts toward the budget. */
  price: ModelPrice | undefined;
}

/** Why a compaction runs: the request would pass the threshold, or the provider refused it as too long. */
export type CompactionCause = "threshold" | "overflow";

/**
 * The tokens of the iteration's request when it must be compacted first, else -1. Reuses the
 * counts the iteration's pruning then reads. Only called when the run has compaction.
 */
export function compactionDue(state: RunState, run: Run, system: string): number {
  const counts = run.options.context?.compaction;
  const compaction = run.options.compaction;
  if (!counts || !compaction) return -1;
  return counts.over(state.messages, system, run.nativeTools, run.contextMemo, compaction.at);
}

/**
 * Compacts the run's history: the event to hand out (`compaction`, or a non-fatal `error` with
 * code `compaction_failed` when the summary could not be written: the run goes on with pruning),
 * or undefined when there was nothing older to summarise or the run was aborted. The summary's
 * usage is added to the run's. `tokensBefore`: the request's tokens when known, else -1.
 */
export async function compactRun(
  state: RunState,
  run: Run,
  system: string,
  cause: CompactionCause,
  tokensBefore: number,
): Promise<AgentEventBody | undefined> {
  const counts = run.options.context?.compaction;
  const compaction = run.options.compaction;
  if (!counts || !compaction) return undefined;
  const tools = run.nativeTools;
  const history = state.messages;
  const limit = counts.threshold(run.contextMemo, compaction.at);
  const cut = cause === "overflow" ? newestTurn(history) : recentCut(history, counts, limit, system, tools);
  const plan = planAt(history, cut);
  // A span smaller than a summary is not worth one (pruning does better); an overflow tries anyway.
  if (!plan || (cause === "threshold" && spanTokens(history, plan, counts) <= summaryTokens(limit)))
    return undefined;
  const before = tokensBefore >= 0 ? tokensBefore : counts.count(history, system, tools);
  const done = await summaryOf(history, plan, compaction, counts, limit, run.signal, run.trace);
  if (done.usage) addUsage(state.usage, done.usage);
  if (run.signal.aborted) return undefined;
  if (done.error !== undefined) {
    return {
      type: "error",
      code: "compaction_failed",
      message: `Compaction failed (${done.error}): older turns are pruned instead.`,
    };
  }
  const messages = applyPlan(
    history,
    plan,
    summaryMessage(done.text, plan.replaced, history.length - plan.cut),
  );
  const after = counts.count(messages, system, tools);
  // A summary longer than what it replaces is dropped (its usage stays counted): pruning does better.
  if (after >= before) return undefined;
  state.messages = messages;
  return {
    type: "compaction",
    summarizedMessages: plan.replaced,
    tokensBefore: before,
    tokensAfter: after,
    usage: done.usage ?? { inputTokens: 0, outputTokens: 0 },
  };
}

/** The tokens of the messages the plan replaces. */
function spanTokens(history: readonly Message[], plan: CompactionPlan, counts: CompactionCounts): number {
  let total = 0;
  for (let i = 0; i < plan.cut; i++)
    if (i !== plan.keep) total += counts.counter.countMessage(history[i] as Message);
  return total;
}

/** Tokens a summary may take: a tenth of the threshold, between 200 and 2,000. */
const summaryTokens = (limit: number) => Math.max(200, Math.min(2_000, Math.floor(limit / 10)));

/**
 * Where the verbatim part starts: the newest turns whose tokens, with the fixed part, the summary
 * and the kept user message, fit in half the threshold (so the next compaction is far off).
 */
function recentCut(
  history: readonly Message[],
  counts: CompactionCounts,
  limit: number,
  system: string,
  tools: readonly ToolSpec[],
): number {
  const { counter } = counts;
  const user = latestUser(history);
  const userTokens = user >= 0 ? counter.countMessage(history[user] as Message) : 0;
  const room = Math.floor(limit / 2) - counts.count([], system, tools) - summaryTokens(limit) - userTokens;
  let cut = history.length;
  let tail = 0;
  for (let i = history.length - 1; i >= 0; i--) {
    const message = history[i] as Message;
    if (i !== user) tail += counter.countMessage(message);
    if (tail > room) break;
    if (message.role !== "tool") cut = i;
  }
  return cut;
}

async function summaryOf(
  history: readonly Message[],
  plan: CompactionPlan,
  compaction: LoopCompaction,
  counts: CompactionCounts,
  limit: number,
  signal: AbortSignal | undefined,
  observer?: SummaryCallObserver,
): Promise<{ text: string; usage: Usage | undefined; error: string | undefined }> {
  const tokens = summaryTokens(limit);
  const words = Math.max(50, Math.floor(tokens * 0.7));
  const inputTokens = Math.max(1_000, limit - 2 * tokens);
  const done = await summarize(
    compaction.model,
    history,
    plan,
    { words, inputTokens, counter: counts.counter },
    signal,
    observer,
  );
  if (done.usage && compaction.price) done.usage.costUsd = costOf(done.usage, compaction.price);
  // A model that writes more than asked is cut (with a marker): the summary must leave room.
  if (done.error === undefined) done.text = truncateToTokens(done.text, 2 * tokens, counts.counter);
  return done;
}

/** What `agent.compact()` did; `messages` is the conversation to go on with. */
export type CompactResult =
  | {
      status: "compacted";
      messages: Message[];
      summarizedMessages: number;
      tokensBefore: number;
      tokensAfter: number;
      usage: Usage;
    }
  | { status: "nothing_to_compact"; messages: readonly Message[] }
  | { status: "failed"; messages: readonly Message[]; error: string; usage: Usage | undefined };

/**
 * Compacts `messages` on demand: everything before the latest exchange (from the latest user
 * message on) becomes one summary. Never rejects.
 */
export async function compactMessages(
  messages: readonly Message[],
  context: LoopContext,
  compaction: Pick<LoopCompaction, "model" | "price">,
  fixed: { system: string; tools: readonly ToolSpec[] },
  signal: AbortSignal | undefined,
): Promise<CompactResult> {
  const counts =
    context.compaction ?? (loopContext({ modelId: compaction.model.id }).compaction as CompactionCounts);
  const user = latestUser(messages);
  const plan = planAt(messages, user >= 0 ? user : newestTurn(messages));
  if (!plan) return { status: "nothing_to_compact", messages };
  const { system, tools } = fixed;
  const limit = counts.threshold(newContextMemo(), 1);
  const done = await summaryOf(messages, plan, { ...compaction, at: 1 }, counts, limit, signal);
  if (done.error !== undefined) return { status: "failed", messages, error: done.error, usage: done.usage };
  const summary = summaryMessage(done.text, plan.replaced, messages.length - plan.cut);
  const compacted = applyPlan(messages, plan, summary);
  return {
    status: "compacted",
    messages: compacted,
    summarizedMessages: plan.replaced,
    tokensBefore: counts.count(messages, system, tools),
    tokensAfter: counts.count(compacted, system, tools),
    usage: done.usage ?? { inputTokens: 0, outputTokens: 0 },
  };
}

/** The loop's compaction from `options.compaction`; undefined when it is off. */
export function loopCompaction(
  options: { model: Model; compaction?: CompactionOptions | undefined; prices?: PriceTable | undefined },
  context: LoopContext,
  price: ModelPrice | undefined,
): LoopCompaction | undefined {
  const { compaction } = options;
  if (compaction === undefined) return undefined;
  const at = compactionAt(compaction.at);
  if (!context.compaction) {
    throw new AgentloopError(
      "invalid_option",
      "compaction needs the built-in pruning: drop the context function (or pass contextManager({ ... }) as context).",
    );
  }
  const model = compaction.model ?? options.model;
  return { at, model, price: model === options.model ? price : resolvePrice(model, options.prices) };
}
