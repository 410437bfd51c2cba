import type { Message } from "../core/messages.js";
import type { ClientTool, RunState } from "../core/run-state.js";
import type { ToolChoice } from "../models/adapter.js";
import type { ClientToolResult } from "./client-tools.js";
import type { OutputSchema } from "./output.js";
import type { Budget } from "./prompt.js";

/** The options of one run (`agent.run()`, `agent.stream()`). */
export interface RunOptions {
  /** Aborting ends the run with `aborted`, cancelling the model call and running tools. */
  signal?: AbortSignal;
  /** This run's limits, over the agent's `budget`. The time limit stops the run with `aborted`. */
  budget?: Budget;
  /** More instructions for this run, appended after the agent's own (e.g. a chat client's system message). */
  instructions?: string;
  /**
   * A previous run's `messages`, to continue that conversation. Not modified. When it ends with
   * an unanswered `ask_question`, the input is the answer: it becomes that call's result.
   */
  history?: readonly Message[];
  /** The run's id, carried by every event. Default: a new `run_<uuid>`. */
  runId?: string;
  /** The session the run belongs to; `turn_complete` and the result carry it. */
  sessionId?: string;
  /** Awaited at every checkpoint (SPEC section 9) with the live state: where a store saves it. */
  checkpoint?: (state: RunState) => Promise<void>;
  /** Tools whose calls need no approval in this run (a person's earlier "always", kept by a session). */
  allowedTools?: readonly string[];
  /**
   * Structured output for this run only, as the agent's `outputSchema` (e.g. a served agent given a
   * client's JSON Schema), for an agent without one of its own; `result.output` is then the
   * validated object. A stored run keeps it (`resume()` validates with it).
   */
  outputSchema?: OutputSchema;
  /**
   * Tools the caller runs itself (a server's client: its shell, its UI), offered after the agent's
   * own; names must differ from theirs. When the model calls one, the reply's other calls run
   * first, then the run stops with `tool_calls`, waiting (`awaiting_tools`) for the results:
   * `resume(state, { toolResults })` continues it. A stored run keeps them.
   */
  clientTools?: readonly ClientTool[];
  /**
   * How the model may use the client tools on this run's first model call: "auto" (default),
   * "required" (some tool call), or `{ name }` (that tool). Not sent when there are none.
   */
  toolChoice?: ToolChoice;
  /** Sent as the provider's `parallel_tool_calls` on this run's model calls when there are client tools. */
  parallelToolCalls?: boolean;
}

/** A run's options for an agent whose output schema is `S`: a run's own `outputSchema` only without one. */
export type OptionsOf<S> = S extends undefined ? RunOptions : Omit<RunOptions, "outputSchema">;

/** How `agent.resume()` continues a run. */
export interface ResumeOptions
  extends Omit<
    RunOptions,
    "history" | "runId" | "sessionId" | "allowedTools" | "outputSchema" | "clientTools"
  > {
  /** The client tools to offer from now on, in place of those the run had (`undefined`: keep them). */
  clientTools?: readonly ClientTool[];
  /** Calls waiting for approval to run: their ids, or "all". */
  approve?: readonly string[] | "all";
  /** Calls waiting for approval to decline (the model reads that the user declined): ids, or "all". */
  deny?: readonly string[] | "all";
  /** The answer to the `ask_question` the run waits on. */
  answer?: string;
  /** The results of the client tools' calls the run waits on (`tool_calls`): one for each. */
  toolResults?: readonly ClientToolResult[];
}
