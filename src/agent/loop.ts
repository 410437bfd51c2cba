import type { AgentEvent } from "../core/events.js";
import type { RunState } from "../core/run-state.js";
import type { ModelError, ModelEvent, ModelReply } from "../models/adapter.js";
import { isContextOverflow } from "../models/model-errors.js";
import { type CallExecution, executeCalls, type PreparedCall } from "../tools/execute.js";
import { type CompactionCause, compactionDue, compactRun } from "./compact.js";
import type { Run, Sink, Stop } from "./run.js";
import {
  ABORTED,
  type Asked,
  approve,
  ask,
  begin,
  callEvents,
  decide,
  decline,
  Events,
  lastEvents,
  mayAskPerson,
  messageEvent,
  modelStream,
  openCalls,
  progressEvent,
  record,
  requestFor,
  resultEvent,
  streamed,
  takeReply,
} from "./stages.js";
import { conclude } from "./state.js";

/** Where the loop is: the stage it runs next (see `runLoop`). Small integers: the switch jumps by a table. */
const BEGIN = 0;
const REQUEST = 1;
const STREAM = 2;
const REPLY = 3;
const CALLS = 4;
const ASK = 5;
const APPROVE = 6;
const DECLINE = 7;
const EXECUTE = 8;
const DECIDE = 9;
const STOP = 10;
const ENDED = 11;
const COMPACT = 12;
type At =
  | typeof BEGIN
  | typeof REQUEST
  | typeof STREAM
  | typeof REPLY
  | typeof CALLS
  | typeof ASK
  | typeof APPROVE
  | typeof DECLINE
  | typeof EXECUTE
  | typeof DECIDE
  | typeof STOP
  | typeof ENDED
  | typeof COMPACT;

const NO_UPDATES: AsyncIterator<ModelEvent> = { next: async () => ({ done: true, value: undefined }) };

/**
 * Where the loop is and what its stages hand on to the next: one object, not locals of the
 * generator, whose registers are saved and restored at every `await` and `yield` (bench/loop-profile.ts,
 * streaming: a frame of twenty locals costs the loop a tenth more than one of eight).
 */
class Position {
  at: At = BEGIN;
  /** Why the loop ends, set before the `STOP` stage. */
  stop: Stop = ABORTED;
  system = "";
  updates: AsyncIterator<ModelEvent> = NO_UPDATES;
  reply: ModelReply | ModelError | undefined = undefined;
  open: PreparedCall[] = [];
  asked: Asked | undefined = undefined;
  asking = 0;
  execution: CallExecution | undefined = undefined;
  /** Compaction (when the run has it): why the next one runs, the request's tokens then (-1: not counted). */
  compaction: CompactionCause = "threshold";
  tokensBefore = -1;
  /** This iteration compacted (or tried): it does not again, and retries an overflow once at most. */
  compacted = false;
  /** A summary could not be written: the run goes on with pruning alone. */
  compactionFailed = false;
}

/**
 * A run from its state to its stop: iterations of one model call and the tool calls it asks for
 * (first the calls a resumed state has pending), then its last events. Yields the events of SPEC
 * section 3, each after `sink.emit`, or when `sink.drained` only emits them. One generator for
 * the whole run: an event costs one hop to its reader, and a waiting run one suspended frame.
 * Mutates `state`, consistent at every event.
 *
 * Each pass runs one stage (stages.ts), awaits what it must (a checkpoint, the model's next
 * update, a person's decision, a tool's outcome), then hands out the events the stage produced:
 * the one place events leave the loop.
 */
export async function* runLoop(state: RunState, run: Run, sink: Sink): AsyncGenerator<AgentEvent, undefined> {
  const { checkpoint } = run;
  // The events of the stage just run; none are made when nobody listens.
  const out = sink.quiet ? undefined : new Events();
  const p = new Position();
  // A run that may delegate tells its children whether anyone listens (delegate.ts).
  if (run.tree) run.tree.quiet = sink.quiet;
  try {
    // The input (or the decisions of a resumed run) is stored before the model is asked.
    if (checkpoint) await checkpoint(state);
    // A resumed run first finishes the calls it has pending.
    if (state.pending) {
      p.open = openCalls(state, state.pending, run);
      p.at = CALLS;
    }
    for (;;) {
      switch (p.at) {
        case BEGIN: {
          const begun = begin(state, run, out);
          if (typeof begun === "string") {
            p.system = begun;
            p.compacted = false;
            p.compaction = "threshold";
            p.at = REQUEST;
          } else {
            p.stop = begun;
            p.at = STOP;
          }
          break;
        }
        case REQUEST: {
          // With compaction on, a request that would pass its threshold is compacted first.
          if (run.options.compaction && !p.compacted && !p.compactionFailed) {
            const tokens = compactionDue(state, run, p.system);
            if (tokens >= 0) {
              p.compaction = "threshold";
              p.tokensBefore = tokens;
              p.at = COMPACT;
              break;
            }
          }
          let request = requestFor(state, run, p.system);
          if (request instanceof Promise) request = await request;
          p.updates = modelStream(run, request, sink);
          p.reply = undefined;
          p.at = STREAM;
          break;
        }
        case STREAM: {
          // Up to the next event (a delta, when someone listens) or the stream's end.
          const { updates } = p;
          let update = await updates.next();
          while (!update.done) {
            p.reply = streamed(update.value, state.runId, out) ?? p.reply;
            if (out?.length) break;
            update = await updates.next();
          }
          if (update.done) p.at = REPLY;
          break;
        }
        case REPLY: {
          p.updates = NO_UPDATES;
          const failed = p.reply && !("toolCalls" in p.reply) ? p.reply : undefined;
          if (failed && isContextOverflow(failed) && !run.signal.aborted) {
            // The provider says the prompt does not fit: compact everything but the newest turn and
            // ask once more; without compaction, say how to turn it on.
            if (run.options.compaction && !p.compactionFailed && p.compaction !== "overflow") {
              p.compaction = "overflow";
              p.tokensBefore = -1;
              p.at = COMPACT;
              break;
            }
            if (!run.options.compaction)
              p.reply = { ...failed, message: `${failed.message}${OVERFLOW_HINT}` };
          }
          const { clock } = run;
          const now = clock.now();
          const taken = takeReply(state, run, p.reply, now);
          if ("type" in taken) {
            p.stop = taken;
            p.at = STOP;
            break;
          }
          // The reply is stored before any of its calls starts (and before its event), so a crash
          // never asks the model again for it; its calls are opened first, which marks those whose
          // arguments no provider would take back.
          if (state.pending) {
            p.open = openCalls(state, state.pending, run);
            if (checkpoint) await checkpoint(state);
            // The calls start at once when nobody is asked (see EXECUTE): nothing but the loop
            // runs between its steps (no reader, no checkpoint), so the reading may be reused.
            else if (sink.quiet) clock.keep(now);
            p.at = CALLS;
          } else {
            p.asked = undefined;
            p.at = DECIDE;
          }
          out?.push(messageEvent(taken, state));
          break;
        }
        case CALLS: {
          // Those without a result run (after approval where needed).
          const { open } = p;
          callEvents(open, state.runId, out);
          p.asked = undefined;
          if (state.pending && mayAskPerson(open, state)) {
            run.clock.forget();
            p.asked = {
              pending: state.pending,
              ready: [],
              approval: false,
              question: undefined,
              client: false,
            };
            p.asking = 0;
            p.at = ASK;
          } else p.at = EXECUTE;
          break;
        }
        case ASK: {
          // One call at a time: a call that needs a decision is announced before `onApproval` is asked.
          const prepared = p.open[p.asking];
          const { asked } = p;
          if (!prepared || !asked) {
            p.at = EXECUTE;
            break;
          }
          const asks = ask(state, run, prepared, asked, out);
          if (asks === "ask") p.at = APPROVE;
          else if (asks) p.asking++;
          else p.at = DECLINE;
          break;
        }
        case APPROVE: {
          const prepared = p.open[p.asking] as PreparedCall;
          const { asked } = p;
          if (asked && (await approve(state, run, prepared, asked))) {
            asked.ready.push(prepared);
            p.asking++;
            p.at = ASK;
          } else p.at = DECLINE;
          break;
        }
        case DECLINE: {
          const result = decline(state, run, p.open[p.asking++] as PreparedCall);
          // Stored before anyone hears of it: an event never reports what a crash could still lose.
          if (checkpoint) await checkpoint(state);
          out?.push(resultEvent(result, 0, state.runId));
          p.at = ASK;
          break;
        }
        case EXECUTE: {
          // Up to the next event or the last outcome. Each result is appended and checkpointed the
          // moment it completes.
          if (!p.execution)
            p.execution = executeCalls(p.asked ? p.asked.ready : p.open, run, run.clock.now());
          const { execution } = p;
          for (;;) {
            const update = execution.take();
            if (update?.type === "outcome") {
              // A sub-agent that waits for approvals: no result yet (`decide` makes the run wait).
              if (update.waits) continue;
              const result = record(state, run, update);
              if (checkpoint) await checkpoint(state);
              if (!out) continue;
              out.push(resultEvent(result, update.durationMs, state.runId));
            } else if (update) {
              if (!out) continue;
              // A sub-agent's events come tagged with where they come from (delegate.ts).
              out.push(update.type === "progress" ? progressEvent(state, update) : update.event);
            } else if (!execution.done) {
              await execution.wait();
              continue;
            } else {
              // The next iteration starts as the last call ends when nothing waited in between.
              if (sink.quiet && !checkpoint && !execution.waited) run.clock.keep(execution.endedAt);
              p.at = DECIDE;
            }
            break;
          }
          break;
        }
        case DECIDE: {
          const { execution } = p;
          const next = decide(state, run, p.asked, execution ? execution.endedAt : -1);
          p.execution = undefined;
          if (next.type === "continue") {
            if (checkpoint) await checkpoint(state);
            p.at = BEGIN;
          } else {
            p.stop = next;
            p.at = STOP;
          }
          break;
        }
        case COMPACT: {
          const event = await compactRun(state, run, p.system, p.compaction, p.tokensBefore);
          p.compacted = true;
          if (event?.type === "compaction") {
            // Stored before the next model call: a crash leaves the old history or this summary.
            if (checkpoint) await checkpoint(state);
          } else if (event) p.compactionFailed = true;
          if (event) out?.push({ ...event, runId: state.runId } as AgentEvent);
          // An overflow nothing could be taken from ends the run as the provider said.
          p.at = p.compaction === "overflow" && event?.type !== "compaction" ? REPLY : REQUEST;
          break;
        }
        case STOP: {
          // Stopped or waiting: the run's last events, after its last checkpoint.
          const { stop } = p;
          conclude(state, stop.type === "wait" ? stop.for : redacted(stop, run));
          if (checkpoint) await checkpoint(state);
          sink.ended(state);
          if (out) lastEvents(state, out, run.trace?.traceId);
          p.at = ENDED;
          break;
        }
      }
      if (out !== undefined && out.length > 0) {
        for (let i = 0; i < out.length; i++) {
          const event = out.at(i);
          sink.emit(event);
          if (!sink.drained) yield event;
        }
        out.clear();
      }
      if (p.at === ENDED) return undefined;
    }
  } catch (error) {
    sink.failed(error);
    // Left mid-reply (`emit` threw): the model's stream is closed, as `for await` would.
    if (p.at === STREAM) await p.updates.return?.();
    throw error;
  }
}

const OVERFLOW_HINT =
  '; turn on compaction (--compact, config "compaction", or the compaction option) to summarise older turns';

/** A stop's error message, with the run's secrets taken out (a model's error may quote its input). */
function redacted(stop: Stop & { type: "stop" }, run: Run): Stop & { type: "stop" } {
  const { error } = stop;
  const redact = run.options.redact;
  if (!error || !redact) return stop;
  return { ...stop, error: { message: redact.text(error.message), code: error.code } };
}
