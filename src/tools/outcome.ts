/** Stage 3 of a tool call: its result as the model will read it. */
import { errorMessage } from "../core/errors.js";
import { checkMedia } from "../core/media.js";
import type { MediaPart } from "../core/messages.js";
import type { CallOutcome, ExecuteOptions, PreparedCall } from "./execute.js";
import { isToolOutput, type Tool } from "./tool.js";

const NO_MEDIA: readonly MediaPart[] = [];

/**
 * What a tool returns for a call that has no result yet because a person must decide first (a
 * sub-agent that waits for approvals): nothing is recorded for it and the run waits for approvals.
 */
export const WAITS: unique symbol = Symbol("agentloop.waits");

/** Stage 3: the result as the model will read it (serialised, redacted, cut), and whether it ends the loop. */
export function outcomeOf(
  prepared: PreparedCall,
  options: ExecuteOptions,
  value: unknown,
  failed: boolean,
  durationMs: number,
): CallOutcome {
  const tool = prepared.tool as Tool;
  if (value === WAITS) {
    const index = prepared.index;
    return {
      type: "outcome",
      index,
      content: "",
      isError: false,
      durationMs,
      breaksLoop: false,
      waits: true,
    };
  }
  let content: string;
  let media: readonly MediaPart[] = NO_MEDIA;
  if (failed) content = errorMessage(value);
  else {
    if (isToolOutput(value)) media = value.media;
    content = serialiseResult(value);
  }
  const isError = failed;
  // Before truncation, so a secret cut at the limit cannot leave a visible prefix.
  if (options.redact) content = options.redact(content);
  content = truncate(content, options.maxResultChars);
  let sent: MediaPart[] | undefined;
  if (media.length > 0) {
    sent = [];
    for (let i = 0; i < media.length; i++) {
      const part = media[i] as MediaPart;
      const checked = checkMedia(part, options.maxImageBytes ?? Number.POSITIVE_INFINITY);
      if ("part" in checked) sent.push(checked.part);
      else content += `\n[${part.type} ${i + 1} of this result not shown: ${checked.problem}]`;
    }
  }
  // A failed call never ends the loop unless a predicate says so: the model should retry.
  const breaks = tool.loopBreaking;
  const breaksLoop =
    typeof breaks === "function"
      ? safePredicate(() => breaks(prepared.value, { content, isError }))
      : breaks === true && !isError;
  const outcome: CallOutcome = {
    type: "outcome",
    index: prepared.index,
    content,
    isError,
    durationMs,
    breaksLoop,
  };
  if (sent?.length) outcome.media = sent;
  return outcome;
}

function safePredicate(predicate: () => boolean): boolean {
  try {
    return predicate() === true;
  } catch {
    return false;
  }
}

/** Strings pass through, a `toolOutput` gives its text; anything else becomes JSON (undefined becomes ""). */
export function serialiseResult(result: unknown): string {
  if (typeof result === "string") return result;
  // What JSON.stringify gives, without its machinery: the commonest non-string results.
  if (typeof result === "number") return Number.isFinite(result) ? String(result) : "null";
  if (typeof result === "boolean") return result ? "true" : "false";
  if (isToolOutput(result)) return result.text;
  if (result === undefined) return "";
  try {
    return JSON.stringify(result) ?? String(result);
  } catch {
    return String(result);
  }
}

/** Cuts text beyond `max` characters and says so visibly. */
function truncate(text: string, max: number): string {
  if (text.length <= max) return text;
  return `${text.slice(0, max)}\n[truncated: showing ${max} of ${text.length} characters]`;
}
