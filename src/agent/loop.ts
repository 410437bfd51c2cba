import type { AgentEvent } from "../core/events.js";
import type { RunState } from "../core/run-state.js";
import type { ModelError, ModelEvent, ModelReply } from "../models/adapter.js";
import { type CallExecution, executeCalls, type PreparedCall } from "../tools/execute.js";
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

/** Where the loop is: the stage it runs next (see `runLoop`). */
type At =
  | "begin"
  | "request"
  | "stream"
  | "reply"
  | "calls"
  | "ask"
  | "approve"
  | "decline"
  | "execute"
  | "decide"
  | "stop"
  | "ended";

const NO_UPDATES: AsyncIterator<ModelEvent> = { next: async () => ({ done: true, value: undefined }) };

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
  const { runId } = state;
  // The events of the stage just run; none are made when nobody listens.
  const out = sink.quiet ? undefined : new Events();
  let at: At = "begin";
  // Why the loop ends, set before the `stop` stage.
  let stop: Stop = ABORTED;
  let system = "";
  let updates = NO_UPDATES;
  let reply: ModelReply | ModelError | undefined;
  let open: PreparedCall[] = [];
  let asked: Asked | undefined;
  let asking = 0;
  let execution: CallExecution | undefined;
  // Nothing but the loop runs between its steps (no reader, no checkpoint): the clock's readings may be reused.
  const alone = sink.quiet && !checkpoint;
  const { clock } = run;
  try {
    // The input (or the decisions of a resumed run) is stored before the model is asked.
    if (checkpoint) await checkpoint(state);
    // A resumed run first finishes the calls it has pending.
    if (state.pending) {
      open = openCalls(state, state.pending, run);
      at = "calls";
    }
    for (;;) {
      switch (at) {
        case "begin": {
          const begun = begin(state, run, out);
          if (typeof begun === "string") {
            system = begun;
            at = "request";
          } else {
            stop = begun;
            at = "stop";
          }
          break;
        }
        case "request": {
          let request = requestFor(state, run, system);
          if (request instanceof Promise) request = await request;
          updates = modelStream(run, request, sink);
          reply = undefined;
          at = "stream";
          break;
        }
        case "stream": {
          // Up to the next event (a delta, when someone listens) or the stream's end.
          let update = await updates.next();
          while (!update.done) {
            reply = streamed(update.value, runId, out) ?? reply;
            if (out?.length) break;
            update = await updates.next();
          }
          if (update.done) at = "reply";
          break;
        }
        case "reply": {
          updates = NO_UPDATES;
          const now = clock.now();
          const taken = takeReply(state, run, reply, now);
          if ("type" in taken) {
            stop = taken;
            at = "stop";
            break;
          }
          // The reply is stored before any of its calls starts (and before its event), so a crash
          // never asks the model again for it; its calls are opened first, which marks those whose
          // arguments no provider would take back.
          if (state.pending) {
            open = openCalls(state, state.pending, run);
            if (checkpoint) await checkpoint(state);
            // The calls start at once when nobody is asked (see "execute").
            if (alone) clock.keep(now);
            at = "calls";
          } else {
            asked = undefined;
            at = "decide";
          }
          out?.push(messageEvent(taken, state));
          break;
        }
        case "calls": {
          // Those without a result run (after approval where needed).
          callEvents(open, runId, out);
          asked = undefined;
          if (state.pending && mayAskPerson(open, state)) {
            clock.forget();
            asked = { pending: state.pending, ready: [], approval: false, question: undefined };
            asking = 0;
            at = "ask";
          } else at = "execute";
          break;
        }
        case "ask": {
          // One call at a time: a call that needs a decision is announced before `onApproval` is asked.
          const prepared = open[asking];
          if (!prepared || !asked) {
            at = "execute";
            break;
          }
          const asks = ask(state, run, prepared, asked, out);
          if (asks === "ask") at = "approve";
          else if (asks) asking++;
          else at = "decline";
          break;
        }
        case "approve": {
          const prepared = open[asking] as PreparedCall;
          if (asked && (await approve(state, run, prepared, asked))) {
            asked.ready.push(prepared);
            asking++;
            at = "ask";
          } else at = "decline";
          break;
        }
        case "decline": {
          const result = decline(state, run, open[asking++] as PreparedCall);
          // Stored before anyone hears of it: an event never reports what a crash could still lose.
          if (checkpoint) await checkpoint(state);
          out?.push(resultEvent(result, 0, runId));
          at = "ask";
          break;
        }
        case "execute":
          // Up to the next event or the last outcome. Each result is appended and checkpointed the
          // moment it completes.
          execution ??= executeCalls(asked ? asked.ready : open, run, clock.now());
          for (;;) {
            const update = execution.take();
            if (update?.type === "outcome") {
              const result = record(state, run, update);
              if (checkpoint) await checkpoint(state);
              if (!out) continue;
              out.push(resultEvent(result, update.durationMs, runId));
            } else if (update) {
              if (!out) continue;
              out.push(progressEvent(state, update));
            } else if (!execution.done) {
              await execution.wait();
              continue;
            } else {
              // The next iteration starts as the last call ends when nothing waited in between.
              if (alone && !execution.waited) clock.keep(execution.endedAt);
              at = "decide";
            }
            break;
          }
          break;
        case "decide": {
          const next = decide(state, run, asked, execution ? execution.endedAt : -1);
          execution = undefined;
          if (next.type === "continue") {
            if (checkpoint) await checkpoint(state);
            at = "begin";
          } else {
            stop = next;
            at = "stop";
          }
          break;
        }
        case "stop":
          // Stopped or waiting: the run's last events, after its last checkpoint.
          conclude(state, stop.type === "wait" ? stop.for : redacted(stop, run));
          if (checkpoint) await checkpoint(state);
          sink.ended(state);
          if (out) lastEvents(state, out);
          at = "ended";
          break;
      }
      if (out !== undefined && out.length > 0) {
        for (let i = 0; i < out.length; i++) {
          const event = out.at(i);
          sink.emit(event);
          if (!sink.drained) yield event;
        }
        out.clear();
      }
      if (at === "ended") return undefined;
    }
  } catch (error) {
    sink.failed(error);
    // Left mid-reply (`emit` threw): the model's stream is closed, as `for await` would.
    if (at === "stream") await updates.return?.();
    throw error;
  }
}

/** A stop's error message, with the run's secrets taken out (a model's error may quote its input). */
function redacted(stop: Stop & { type: "stop" }, run: Run): Stop & { type: "stop" } {
  const { error } = stop;
  const redact = run.options.redact;
  if (!error || !redact) return stop;
  return { ...stop, error: { message: redact.text(error.message), code: error.code } };
}
