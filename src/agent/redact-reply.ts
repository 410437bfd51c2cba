/**
 * Configured secrets in what the model says: removed from a reply before the run keeps it (so
 * neither events, nor the state a store writes, nor the history hold them), while the tools still
 * run with the arguments the model sent.
 */
import type { ToolCall } from "../core/messages.js";
import type { Redactor } from "../core/redact.js";
import type { ModelEvent, ModelReply } from "../models/adapter.js";
import { type PreparedCall, prepareCall } from "../tools/execute.js";
import type { Run } from "./run.js";

/**
 * The reply with its text, refusal, unsigned thinking and tool call arguments redacted (in place;
 * calls are replaced, not changed). The arguments a call had before are kept in
 * `run.realArguments` for its execution. Signed thinking is left whole: it goes back to the
 * provider, which refuses it changed.
 */
export function redactReply(reply: ModelReply, redact: Redactor, run: Run): void {
  reply.content = redact.text(reply.content);
  if (reply.refusal !== undefined) reply.refusal = redact.text(reply.refusal);
  if (reply.thinking && !reply.thinkingSignature) reply.thinking = redact.text(reply.thinking);
  const calls = reply.toolCalls;
  for (let i = 0; i < calls.length; i++) {
    const call = calls[i] as ToolCall;
    const shown = redact.json(call.arguments);
    const invalid = call.invalid === undefined ? undefined : redact.text(call.invalid);
    if (shown === call.arguments && invalid === call.invalid) continue;
    if (shown !== call.arguments) {
      run.realArguments ??= new Map();
      run.realArguments.set(call.id, call.arguments);
    }
    calls[i] = { ...call, arguments: shown, ...(invalid !== undefined && { invalid }) };
  }
}

/**
 * A call prepared to run with the arguments the model sent when the run kept them
 * (`run.realArguments`, then forgotten), its events showing the redacted ones; else as kept.
 */
export function prepareKept(call: ToolCall, index: number, run: Run): PreparedCall {
  const real = run.realArguments?.get(call.id);
  if (real === undefined) return prepareCall(call, index, run.tools);
  run.realArguments?.delete(call.id);
  const prepared = prepareCall({ ...call, arguments: real }, index, run.tools);
  prepared.call = call;
  prepared.arguments = prepareCall(call, index, run.tools).arguments;
  // A parse or validation error may quote the arguments.
  if (prepared.error !== undefined && run.redact) prepared.error = run.redact(prepared.error);
  return prepared;
}

/**
 * A model's stream with configured secrets redacted from its text and thinking deltas as they
 * arrive: a delta shows what cannot be the start of a secret, and what is held back follows with
 * the next delta, or just before `done` (thinking first). Joined, the deltas never hold a secret;
 * the assembled reply is redacted apart (`redactReply`).
 */
export async function* redactedStream(
  updates: AsyncIterable<ModelEvent>,
  redact: Redactor,
): AsyncGenerator<ModelEvent, void, undefined> {
  const text = redact.pieces();
  const thinking = redact.pieces();
  for await (const update of updates) {
    if (update.type === "text_delta" || update.type === "thinking_delta") {
      const shown = (update.type === "text_delta" ? text : thinking).push(update.text);
      if (shown !== "") yield { type: update.type, text: shown };
      continue;
    }
    if (update.type === "done") {
      const held = thinking.end();
      if (held !== "") yield { type: "thinking_delta", text: held };
      const rest = text.end();
      if (rest !== "") yield { type: "text_delta", text: rest };
    }
    yield update;
  }
}
