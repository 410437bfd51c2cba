/**
 * What the loop guarantees of every reply's tool calls, on arrival and again when a history is
 * loaded (a stored log or a state written by an older version): each call of a reply has its own
 * id, and a call without `invalid` has arguments that are one JSON object. Approvals, results and
 * resumes find a call by its id, and providers refuse a history that breaks either rule.
 */
import type { AssistantMessage, Message, ToolCall, ToolMessage } from "../core/messages.js";
import { readArguments } from "../tools/execute.js";

/**
 * The calls with every id made unique, or undefined when they already are (most replies: no
 * allocation). The second call named `x` becomes `x_2`, the third `x_3` (skipping a name another
 * call has): a function of the calls alone, so a reply and its stored copy agree.
 */
export function uniqueIds(calls: readonly ToolCall[]): ToolCall[] | undefined {
  if (!hasDuplicate(calls)) return undefined;
  const taken = new Set(calls.map((call) => call.id));
  const seen = new Set<string>();
  return calls.map((call) => {
    if (!seen.has(call.id)) {
      seen.add(call.id);
      return call;
    }
    let n = 2;
    while (taken.has(`${call.id}_${n}`)) n++;
    const id = `${call.id}_${n}`;
    taken.add(id);
    return { ...call, id };
  });
}

function hasDuplicate(calls: readonly ToolCall[]): boolean {
  if (calls.length < 2) return false;
  if (calls.length > 16) return new Set(calls.map((call) => call.id)).size < calls.length;
  for (let i = 1; i < calls.length; i++) {
    const id = (calls[i] as ToolCall).id;
    for (let j = 0; j < i; j++) if ((calls[j] as ToolCall).id === id) return true;
  }
  return false;
}

/** A call whose arguments are not one JSON object, marked `invalid` (its error result says why); else the call. */
function readable(call: ToolCall): ToolCall {
  if (call.invalid !== undefined) return call;
  const read = readArguments(call);
  return typeof read === "string" ? { ...call, invalid: read } : call;
}

/**
 * The reply at `log[at]` and its results `log[at+1 .. end)`, repaired in place in `log` (new
 * objects for what changes, the originals untouched): unique ids (see `uniqueIds`; the results
 * follow their calls) and unreadable arguments marked `invalid`. Returns whether anything changed.
 */
export function repairReply(log: Message[], at: number, end: number): boolean {
  const message = log[at] as AssistantMessage;
  const calls = message.toolCalls ?? [];
  let changed = false;
  const marked = calls.map((call) => {
    const next = readable(call);
    if (next !== call) changed = true;
    return next;
  });
  const unique = uniqueIds(marked);
  if (unique) {
    changed = true;
    // Each result naming a duplicated id goes to the first call of that id and its tool still
    // without one (a result naming a renamed id already has its call).
    const open = unique.map((call, i) => ({ original: (calls[i] as ToolCall).id, call }));
    for (let i = at + 1; i < end; i++) {
      const result = log[i] as ToolMessage;
      const renamed = open.findIndex((o) => o.call.id === result.toolCallId && o.original !== o.call.id);
      const named = open.findIndex((o) => o.original === result.toolCallId && o.call.name === result.name);
      const match =
        renamed >= 0 ? renamed : named >= 0 ? named : open.findIndex((o) => o.original === result.toolCallId);
      if (match < 0) continue;
      const id = (open[match] as { call: ToolCall }).call.id;
      open.splice(match, 1);
      if (id !== result.toolCallId) log[i] = { ...result, toolCallId: id };
    }
  }
  if (changed) log[at] = { ...message, toolCalls: unique ?? marked };
  return changed;
}

/**
 * `log` with every reply repaired (see `repairReply`): a copy when something changed, else
 * undefined. For a state written by an older version, whose log never passed `inCallOrder`.
 */
export function repairedHistory(log: readonly Message[]): Message[] | undefined {
  let out: Message[] | undefined;
  for (let i = 0; i < log.length; i++) {
    const message = log[i] as Message;
    if (message.role !== "assistant" || !message.toolCalls?.length) continue;
    let end = i + 1;
    while (end < log.length && (log[end] as Message).role === "tool") end++;
    const copy = out ?? log.slice();
    if (repairReply(copy, i, end)) out = copy;
    i = end - 1;
  }
  return out;
}
