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

export function systemPrompt(stable: string, warning: string | undefined): string {
  if (!warning) return stable;
  return stable === "" ? warning : `${stable}\n\n${warning}`;
}
