import type { ToolSpec } from "../models/adapter.js";
import { xmlToolInstructions } from "../models/xml-protocol.js";

export type Mode = "natural" | "explicit";
export type ToolProtocol = "native" | "xml";

const EXPLICIT_RULES =
  "Call a tool in every reply. When the task is done, call task_completion with the complete result. " +
  "If you need information only the user can give, call ask_question. " +
  "To simply talk with the user when there is no task to do, call converse.";

/** The correction appended when a reply in explicit mode has no tool call. */
export const EXPLICIT_CORRECTION =
  "You replied without calling a tool. Call a tool; use task_completion when done (or ask_question if you need the user's input).";

/**
 * The part of the system prompt that never changes within a run: instructions, mode rules,
 * and for the xml protocol the tool catalogue and format rules. Byte-identical between
 * iterations so providers' prompt caches hit; only `iterationWarning` is appended after it.
 */
export function stablePrompt(options: {
  instructions: string;
  mode: Mode;
  toolProtocol: ToolProtocol;
  tools: readonly ToolSpec[];
}): string {
  const parts = [options.instructions.trim()];
  if (options.mode === "explicit") parts.push(EXPLICIT_RULES);
  if (options.toolProtocol === "xml" && options.tools.length > 0)
    parts.push(xmlToolInstructions(options.tools));
  return parts.filter((part) => part !== "").join("\n\n");
}

/**
 * The warning for the end of the system prompt when few iterations remain: when the
 * iterations left (this one included) are at most max(2, 20% of the limit).
 */
export function iterationWarning(iteration: number, maxIterations: number, mode: Mode): string | undefined {
  const remaining = maxIterations - iteration + 1;
  if (remaining > Math.max(2, Math.floor(maxIterations * 0.2))) return undefined;
  const finish =
    mode === "explicit"
      ? "call task_completion with your result now"
      : "give your final answer now, without further tool calls";
  const left =
    remaining <= 1 ? "This is your last iteration" : `Only ${remaining} iterations remain, this one included`;
  return `${left} (iteration ${iteration} of ${maxIterations}). Wrap up: ${finish}.`;
}

/** The limits of one run; each is optional. */
export interface Budget {
  /** Input plus output tokens over the whole run; `budget_exceeded` when spent. */
  maxTokens?: number;
  /** Cost in USD over the whole run (needs the model's price); `budget_exceeded` when spent. */
  maxCostUsd?: number;
  /** Wall time of the run; `aborted` when it passes. */
  timeoutMs?: number;
}

/** What has been spent so far, to compare with the budget. */
export interface Spent {
  tokens: number;
  costUsd: number;
  elapsedMs: number;
}

/** Why the run must stop before its next model call (a token or cost budget spent), else undefined. */
export function budgetExceeded(budget: Budget, spent: Spent): string | undefined {
  if (budget.maxTokens !== undefined && spent.tokens >= budget.maxTokens) {
    return `Token budget spent: ${spent.tokens} of ${budget.maxTokens} tokens.`;
  }
  if (budget.maxCostUsd !== undefined && spent.costUsd >= budget.maxCostUsd) {
    return `Cost budget spent: ${formatUsd(spent.costUsd)} of ${formatUsd(budget.maxCostUsd)}.`;
  }
  return undefined;
}

/** The soft warning once 80% of any budget is spent. */
export function budgetWarning(budget: Budget, spent: Spent): string | undefined {
  const used: string[] = [];
  const share = (value: number, limit: number | undefined) => (limit ? value / limit : 0);
  if (share(spent.tokens, budget.maxTokens) >= 0.8)
    used.push(`${spent.tokens} of ${budget.maxTokens} tokens`);
  if (share(spent.costUsd, budget.maxCostUsd) >= 0.8) {
    used.push(`${formatUsd(spent.costUsd)} of ${formatUsd(budget.maxCostUsd ?? 0)} budget`);
  }
  if (share(spent.elapsedMs, budget.timeoutMs) >= 0.8) {
    used.push(
      `${Math.round(spent.elapsedMs / 1000)} s of the ${Math.round((budget.timeoutMs ?? 0) / 1000)} s time limit`,
    );
  }
  if (used.length === 0) return undefined;
  return `Budget nearly spent (${used.join(", ")} used). Finish the task now with what you have.`;
}

/** An amount of USD as people write it: "$0.0000001", "$0.0012", "$12.35"; never "$1e-7". */
function formatUsd(usd: number): string {
  if (usd >= 1)
    return `$${usd.toLocaleString("en-US", { minimumFractionDigits: 2, maximumFractionDigits: 2 })}`;
  return `$${usd.toLocaleString("en-US", { maximumSignificantDigits: 2 })}`;
}

/** Stable part first, then the warnings of this iteration. */
export function systemPrompt(stable: string, ...warnings: (string | undefined)[]): string {
  let prompt = stable;
  for (const warning of warnings) if (warning) prompt = prompt === "" ? warning : `${prompt}\n\n${warning}`;
  return prompt;
}
