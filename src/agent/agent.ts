import type { TracerProvider } from "@opentelemetry/api";
import { AgentloopError } from "../core/errors.js";
import type { AgentEvent, PendingApproval, RunResult } from "../core/events.js";
import { newRunId } from "../core/ids.js";
import { DEFAULT_MAX_MEDIA_BYTES, userMessage } from "../core/media.js";
import type { Message, UserInput } from "../core/messages.js";
import { environmentSecrets, type Redactor, secretRedactor } from "../core/redact.js";
import type { CompactionOptions } from "../memory/compaction.js";
import {
  type ContextManager,
  type ContextTransform,
  type LoopContext,
  loopContext,
  loopContextOf,
} from "../memory/prune.js";
import type { Model, ToolSpec } from "../models/adapter.js";
import { type ModelPrice, type PriceTable, resolvePrice } from "../models/pricing.js";
import { xmlToolProtocol } from "../models/xml-protocol.js";
import { type Recorder, recorder } from "../record/recorder.js";
import { loopBreakingTools } from "../tools/builtin/loop-breaking.js";
import type { Tool } from "../tools/tool.js";
import { type AgentTracing, agentTracing, traceRun } from "../tracing/run-trace.js";
import { type CompactResult, compactMessages, type LoopCompaction, loopCompaction } from "./compact.js";
import { DEFAULTS } from "./defaults.js";
import { agentTool, type ChildLink, childApproval, delegateToolOf, treeOf } from "./delegate.js";
import { RunHandle } from "./handle.js";
import { repairedHistory } from "./repair.js";
import type { OptionsOf, ResumeOptions, RunOptions } from "./run-options.js";

export type { CompactResult } from "./compact.js";
export { DEFAULTS } from "./defaults.js";
export type { ResumeOptions, RunOptions } from "./run-options.js";

import { checkClientTools, clientTool, recordClientResults } from "./client-tools.js";
import {
  type OutputOf,
  type OutputSchema,
  type OutputSpec,
  outputSpec,
  taskCompletionFor,
} from "./output.js";
import type { Budget, Mode, ToolProtocol } from "./prompt.js";
import { type ApprovalDecision, fixedPart, type LoopOptions, startRun } from "./run.js";
import { afterHistory, checkRunState, type RunState, recordDecisions, reopen } from "./state.js";

export interface AgentOptions<S extends OutputSchema | undefined = undefined> {
  model: Model;
  /** The agent's name: `gen_ai.agent.name` of its runs' spans. Default "agentloop". */
  name?: string;
  /**
   * Where its runs' OpenTelemetry spans go (SPEC section 11). Default: the global provider (the
   * SDK registered with `@opentelemetry/api`); with none registered nothing is recorded.
   */
  tracerProvider?: TracerProvider;
  /**
   * Record message content on spans (instructions, messages, tool arguments and results, with the
   * configured `secrets` redacted). Default: off, unless
   * `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT` is `true`, `SPAN_ONLY` or `SPAN_AND_EVENT`.
   */
  captureMessageContent?: boolean;
  /**
   * Record every run of this agent (SPEC section 12): a file (created, or emptied, when the agent
   * is made) or a `recorder(file)` several agents share (a run's sub-agents write into one file).
   * Each model request and response is written as the HTTP client sent and read it (never its
   * headers; the `secrets` and the environment's API keys as `[REDACTED]`), and each tool result.
   * The model must be one of agentloop's adapters (it has `withFetch`). Replay the file with
   * `replayModel` and `replayTools` from `agentloop-runtime/testing`, or `agentloop run --replay`.
   */
  record?: string | Recorder;
  /** The agent's instructions: the start of every system prompt. */
  instructions?: string;
  /** What the agent does, for a parent agent that delegates to it (the model chooses by it). */
  description?: string;
  /**
   * Sub-agents this agent may hand tasks to, by name (`^[a-zA-Z0-9_-]{1,64}$`): the model is offered
   * `delegate_task` (`agent`, one of these names; `task`), which runs the agent as a child run on a
   * fresh history and returns its answer (SPEC section 10). Children share this run's budget,
   * abort signal, `onApproval`, event stream and checkpoints.
   */
  agents?: Readonly<Record<string, AnyAgent>>;
  /** How deep sub-agents may nest below this agent's runs (a child of the top-level run has depth 1). Default 3. */
  maxDepth?: number;
  /**
   * Tools offered to the model, in this order. Names must be unique.
   * A list, or a function read at the start of every run (for catalogues that change, such as
   * MCP servers' after `tools/list_changed`). Within a run the list is fixed, so the prompt
   * prefix stays byte-identical between iterations.
   */
  tools?: readonly Tool[] | (() => readonly Tool[]);
  /**
   * `natural` (default): a reply without a tool call is the final answer. `explicit`: the agent
   * must end the run by calling `task_completion`, `ask_question` or `converse` (added to the
   * tools); a reply without a tool call gets a correction and the loop goes on.
   */
  mode?: Mode;
  /**
   * `native` (default): the provider's function calling. `xml`: tools are described in the
   * system prompt and called with `<tool>{...}</tool>` blocks in the reply text.
   */
  toolProtocol?: ToolProtocol;
  /** Identical failures in a row (same tool, arguments and error) that stop the run. Default 3. */
  circuitBreakerThreshold?: number;
  /** Identical calls in a row after which the model is warned. Default 3. */
  repetitionThreshold?: number;
  /**
   * The token limit of every model request (system prompt and tool schemas included): the
   * model's context window when known, else 100,000. Older turns are dropped (or summarised)
   * to stay under it, never separating a tool call from its result; the run's history stays whole.
   */
  maxContextTokens?: number;
  /** What stands for dropped turns: a notice ("drop", default) or a summary written by `summarizer`. */
  contextStrategy?: "drop" | "summarize";
  /** The model that writes summaries for the "summarize" strategy. Default: the agent's model. */
  summarizer?: Model;
  /**
   * What each model request sends of the history, in place of the built-in pruning (and of
   * `maxContextTokens`, `contextStrategy` and `summarizer`, which go with it): a
   * `contextManager({...})` of your own (another token counter, headroom or tool-result limit),
   * any `ContextManager`, or a `ContextTransform` function (`(history, { system, tools, signal })
   * => messages`) that decides alone. The run's history stays whole either way.
   */
  context?: ContextManager | ContextTransform;
  /**
   * Compaction by summary (SPEC section 13): when a request would pass `at` (default 0.8) times
   * `maxContextTokens`, or the provider answers that the prompt is too long, the older history is
   * replaced by one summary that `model` (default the agent's) writes, the newest turns kept
   * verbatim; the summary is part of the run's messages and state (and of a session's log). Off
   * by default: older turns are then pruned per request. Needs the built-in pruning (no `context`
   * function). `agent.compact(messages)` compacts a conversation on demand.
   */
  compaction?: CompactionOptions;
  /** Limits of every run (tokens, cost, time); a run's own `budget` overrides them field by field. */
  budget?: Budget;
  /**
   * Model prices (USD per million tokens), over the adapter's own (free for a local endpoint) and
   * the built-in table; used for `usage.costUsd` and cost budgets.
   */
  prices?: PriceTable;
  /**
   * Structured output: a zod schema (the type of `result.output` flows from it) or a JSON Schema,
   * whose root must be an object. The final answer must be one JSON object valid against it; the
   * provider enforces it where it can (OpenAI `response_format` json_schema, strict when the schema
   * allows; Anthropic `output_config.format` or a forced tool), else the system prompt describes
   * it. An answer that does not validate goes back to the model with the errors and counts toward
   * the circuit breaker (any invalid answer repeats the same error). Works with tools; in explicit
   * mode it is the schema of `task_completion`'s `result`. `result.output` is the parsed object when
   * the run ended with an answer, else `undefined`; `result.text` and `turn_complete.output` carry
   * it as JSON text. Stop reasons are unchanged.
   */
  outputSchema?: S;
  /**
   * The largest image (or audio clip) sent to the model, decoded: 5 MiB by default (Anthropic's
   * limit). An input image over it is an error (`image_too_large`); a tool result's is replaced by
   * a note the model reads.
   */
  maxImageBytes?: number;
  /** Model calls per run before it stops with `max_iterations`. Default 10. */
  maxIterations?: number;
  /** Time limit of one tool call unless the tool sets its own. Default 60,000 ms. */
  toolTimeoutMs?: number;
  /** Tool results longer than this are cut, with a visible marker. Default 32,000 characters. */
  maxToolResultChars?: number;
  /** Tool calls of one iteration in flight at once. Default 8. */
  toolConcurrency?: number;
  /**
   * Strings that must never appear in events, results, the run's state (what a store keeps) or the
   * history the model reads (API keys, tokens): each verbatim occurrence in a model reply (its text,
   * refusal, tool call arguments and unsigned thinking), a streamed delta, a tool result, a tool
   * progress message or an error message is replaced by `[REDACTED]`. The tools still run with the
   * arguments the model sent (a call resumed from a stored state runs with them as stored). Signed
   * thinking (Anthropic's) is kept as it came: the provider refuses it changed. The run's input is
   * not changed. Always added: the values of `OPENAI_API_KEY`, `ANTHROPIC_API_KEY` and
   * `AGENTLOOP_API_KEY` in the environment when the agent is created.
   */
  secrets?: readonly string[];
  /**
   * Called with every event of every run before it is yielded. Must not throw: an exception there
   * does not break the run; the first of a run is reported as a process warning
   * (`process.emitWarning`, type `AgentloopWarning`, secrets redacted).
   */
  onEvent?: (event: AgentEvent) => void;
  /**
   * Asks a person about a call that needs approval (a tool's `needsApproval`): "approve" runs it,
   * "deny" gives the model an error result saying the user declined, "always" runs it and every
   * later call of that tool in the run. Without it, such calls wait: the run stops with
   * `approval_required` and `agent.resume(result.state, { approve, deny })` continues it.
   */
  onApproval?: (call: PendingApproval) => ApprovalDecision | Promise<ApprovalDecision>;
}

/**
 * An agent: instructions, a model, tools and policies. `run()` is `stream()` consumed. `S` is the
 * type of its `outputSchema` (inferred), which gives `result.output` its type.
 */
export class Agent<S extends OutputSchema | undefined = undefined> {
  readonly options: Readonly<AgentOptions<S>>;
  /** Where its runs are recorded (`record`), if anywhere. */
  private readonly recorder: Recorder | undefined;
  /** Every tool offered to the next run, in order: the agent's own, then the loop-breaking ones in explicit mode. */
  get tools(): readonly Tool[] {
    return this.fixedTools ?? this.toolsFor(this.output);
  }
  /** The tool list when `options.tools` is a list: built once, shared by every run (and its derived specs). */
  private readonly fixedTools: readonly Tool[] | undefined;

  /** The tools with `task_completion` taking the answer object of `spec` (explicit mode). */
  private toolsFor(spec: OutputSpec | undefined): readonly Tool[] {
    const own = typeof this.options.tools === "function" ? this.options.tools() : (this.options.tools ?? []);
    const breaking = this.options.mode === "explicit" ? loopBreakingTools() : [];
    const withSchema = (t: Tool) => (spec && t.name === "task_completion" ? taskCompletionFor(spec, t) : t);
    const delegate = this.delegate ? [this.delegate] : [];
    const tools = [...own, ...delegate, ...breaking.map(withSchema)];
    const seen = new Set<string>();
    for (const tool of tools) {
      if (seen.has(tool.name)) {
        throw new AgentloopError(
          "invalid_tool",
          `Two tools are named '${tool.name}': tool names must be unique.`,
        );
      }
      seen.add(tool.name);
    }
    return tools;
  }
  /** `delegate_task`, when the agent has sub-agents. */
  private readonly delegate: Tool | undefined;
  private readonly model: Model;
  private readonly price: ModelPrice | undefined;
  private readonly context: LoopContext;
  private readonly redact: Redactor | undefined;
  private readonly output: OutputSpec | undefined;
  private readonly tracing: AgentTracing;
  /** Its tracing as a sub-agent, by the name it is delegated to (see `tracingAs`). */
  private readonly childTracings = new Map<string, AgentTracing>();
  /** The loop options of the runs with nothing of their own, made by the first. */
  private shared: LoopOptions | undefined;
  private readonly compaction: LoopCompaction | undefined;
  /** The same for its runs as a sub-agent, by the tree's budget. */
  private readonly childShared = new WeakMap<Budget, LoopOptions>();

  /**
   * @throws AgentloopError("invalid_option") for a bad option: an `outputSchema` that is not an
   * object schema, a limit that is not positive, a cost budget without a price...
   */
  constructor(options: AgentOptions<S>) {
    const maxIterations = options.maxIterations ?? DEFAULTS.maxIterations;
    if (!Number.isInteger(maxIterations) || maxIterations < 1) {
      throw new AgentloopError(
        "invalid_option",
        `maxIterations must be a positive integer, got ${maxIterations}.`,
      );
    }
    for (const name of [
      "circuitBreakerThreshold",
      "repetitionThreshold",
      "toolConcurrency",
      "maxImageBytes",
    ] as const) {
      const value = options[name];
      if (value !== undefined && (!Number.isInteger(value) || value < 1)) {
        throw new AgentloopError("invalid_option", `${name} must be a positive integer, got ${value}.`);
      }
    }
    const recording =
      typeof options.record === "string"
        ? recorder(options.record, { secrets: options.secrets ?? [] })
        : options.record;
    if (recording) {
      const model = options.model.withFetch?.(recording.fetch);
      if (!model) {
        throw new AgentloopError(
          "invalid_option",
          "record needs a model made by openAIChatModel, openAIResponsesModel or anthropicModel without a client of its own (it records at their HTTP boundary).",
        );
      }
      options = { ...options, model };
    }
    this.recorder = recording;
    this.options = options;
    this.delegate = delegateToolOf(options.agents, options.maxDepth);
    this.output = options.outputSchema === undefined ? undefined : outputSpec(options.outputSchema);
    // Fails fast on duplicate names.
    this.fixedTools = typeof options.tools === "function" ? undefined : this.toolsFor(this.output);
    this.model = options.toolProtocol === "xml" ? xmlToolProtocol(options.model) : options.model;
    this.context =
      options.context === undefined
        ? loopContext({
            modelId: options.model.id,
            ...(options.maxContextTokens !== undefined && { maxContextTokens: options.maxContextTokens }),
            ...(options.contextStrategy !== undefined && { strategy: options.contextStrategy }),
            summarizer: options.summarizer ?? options.model,
          })
        : ownContext(options);
    this.redact = secretRedactor([...environmentSecrets(), ...(options.secrets ?? [])]);
    this.price = resolvePrice(options.model, options.prices);
    this.compaction = loopCompaction(options, this.context, this.price);
    this.tracing = agentTracing(options.model, options);
    this.checkBudget(options.budget ?? {});
  }

  /**
   * Compacts a conversation now (`/compact` in chat): everything before its latest exchange (the
   * latest user message and what follows it) becomes one summary, as a run's compaction does, with
   * the agent's compaction model (or its own model when compaction is off). Resolves to undefined
   * `status` "nothing_to_compact" when there is nothing older, "failed" (with `error`) when the
   * summary could not be written: `messages` is then the conversation as it was. Never rejects.
   */
  compact(messages: readonly Message[], options: { signal?: AbortSignal } = {}): Promise<CompactResult> {
    const model = this.compaction?.model ?? this.options.model;
    const price = this.compaction ? this.compaction.price : this.price;
    return compactMessages(messages, this.context, { model, price }, this.stable(), options.signal);
  }

  /** The system prompt of a run with nothing of its own (what a compaction counts with). */
  private stable(): { system: string; tools: readonly ToolSpec[] } {
    this.shared ??= this.loopOptions(this.output, this.options.budget ?? NO_BUDGET, undefined);
    return fixedPart(this.shared);
  }

  private checkBudget(budget: Budget): void {
    for (const [name, value] of Object.entries(budget)) {
      if (value !== undefined && !(typeof value === "number" && value > 0)) {
        throw new AgentloopError("invalid_option", `budget.${name} must be a positive number, got ${value}.`);
      }
    }
    if (budget.maxCostUsd !== undefined && !this.price) {
      const id = this.options.model.id;
      throw new AgentloopError(
        "invalid_option",
        `A cost budget needs the price of model '${id}': pass prices: { "${id}": { input, output } } in USD per million tokens.`,
      );
    }
  }

  /**
   * Runs to a stop and returns the result. Never rejects for model or tool failures.
   * @throws AgentloopError, synchronously, as `stream()` does.
   */
  run<T extends OutputSchema>(
    this: Agent<undefined>,
    input: UserInput,
    options: RunOptions & { outputSchema: T },
  ): Promise<RunResult<OutputOf<T>>>;
  run(input: UserInput, options?: OptionsOf<S>): Promise<RunResult<OutputOf<S>>>;
  run(input: UserInput, options: RunOptions = {}): Promise<RunResult<OutputOf<S>>> {
    return this.stream(input, options).result;
  }

  /**
   * Starts one run: iterate the handle for its events, await `handle.result` for its end. `input`
   * is text, or text and image parts (`[{ type: "text", text }, { type: "image", image }]`).
   * @throws AgentloopError for bad options (a budget that is not positive, an `outputSchema` that
   * is not an object schema or given to an agent that has its own, ...) or an image that cannot be
   * sent (`invalid_image`, `image_too_large`).
   */
  stream<T extends OutputSchema>(
    this: Agent<undefined>,
    input: UserInput,
    options: RunOptions & { outputSchema: T },
  ): RunHandle<OutputOf<T>>;
  stream(input: UserInput, options?: OptionsOf<S>): RunHandle<OutputOf<S>>;
  stream<Output>(input: UserInput, options: RunOptions = {}): RunHandle<Output> {
    const message = userMessage(input, this.options.maxImageBytes ?? DEFAULT_MAX_MEDIA_BYTES);
    // A history from outside (a client's messages, a caller's own store) is repaired as a stored
    // log is (unique call ids, unreadable arguments marked `invalid`): a provider would refuse it.
    const given = options.history ?? [];
    const state = afterHistory(
      options.runId ?? newRunId(),
      repairedHistory(given) ?? given,
      message,
      options.sessionId,
      this.options.model.id,
    );
    if (options.allowedTools) state.allowedTools.push(...options.allowedTools);
    if (options.clientTools?.length) state.clientTools = checkClientTools(options.clientTools, this.tools);
    return this.start<Output>(state, options);
  }

  /**
   * Continues a run from its state (a `RunResult.state`, or one a store kept): a run waiting for
   * approvals (`approve`/`deny`), for an answer (`answer`), or one whose process died (its
   * completed calls are not run again; calls that were in flight run again). It goes on with
   * this agent's model, whatever `state.model` says (the caller checks it when that matters).
   * @throws AgentloopError("invalid_state") for a state that cannot continue, or a decision on a call that is not waiting.
   */
  resume(state: RunState, options: ResumeOptions = {}): RunHandle<OutputOf<S>> {
    return this.start<OutputOf<S>>(this.reopened(state, options), options);
  }

  /** `state` checked and reopened with the decisions or answer of `options` (see `resume`). */
  private reopened(state: RunState, options: ResumeOptions): RunState {
    const s = checkRunState(state);
    s.messages = repairedHistory(s.messages) ?? s.messages;
    if (s.status === "completed") {
      throw new AgentloopError(
        "invalid_state",
        `Run ${s.runId} has completed (${s.stopReason}): start a new run with its messages as history.`,
      );
    }
    if (s.status === "awaiting_approval") recordDecisions(s, options.approve, options.deny);
    else if (options.approve !== undefined || options.deny !== undefined) {
      throw new AgentloopError("invalid_state", `Run ${s.runId} is not waiting for approvals.`);
    }
    if (s.status === "awaiting_answer" && options.answer === undefined) {
      throw new AgentloopError("invalid_state", `Run ${s.runId} waits for an answer: pass { answer }.`);
    }
    if (s.status === "awaiting_tools") recordClientResults(s, options.toolResults ?? []);
    else if (options.toolResults !== undefined) {
      throw new AgentloopError("invalid_state", `Run ${s.runId} is not waiting for tool results.`);
    }
    if (options.clientTools)
      s.clientTools = options.clientTools.length
        ? checkClientTools(options.clientTools, this.tools)
        : undefined;
    reopen(s, this.options.model.id, options.answer);
    return s;
  }

  /** This agent as a tool (`task`, a string) that runs it as a sub-agent of the calling run (SPEC section 10). */
  asTool(options: { name: string; description: string }): Tool {
    return agentTool(this, options.name, options.description);
  }

  /**
   * @internal A run of this agent as a sub-agent (delegate.ts): a new one on `task` (its
   * instructions, then the task), or a child's stored state continued.
   */
  startChild(from: string | RunState, link: ChildLink): RunHandle<OutputOf<S>> {
    const options = { signal: link.signal };
    if (typeof from !== "string") return this.start(this.reopened(from, options), options, link);
    const task = userMessage(from, Number.POSITIVE_INFINITY);
    return this.start(afterHistory(newRunId(), [], task, undefined, this.options.model.id), options, link);
  }

  /** Starts the loop on `state`; `Output` is what the caller's signature promises `result.output` is. */
  private start<Output>(
    state: RunState,
    options: RunOptions | ResumeOptions,
    link?: ChildLink,
  ): RunHandle<Output> {
    const o = this.options;
    // The agent's schema, or the run's own, else the one the run was started with (a stored run
    // resumed by an agent without one).
    let output = this.output;
    if ("outputSchema" in options && options.outputSchema !== undefined) {
      if (output) {
        throw new AgentloopError(
          "invalid_option",
          "outputSchema: this agent has its own outputSchema, which a run cannot replace: create an Agent without one, or with this schema.",
        );
      }
      output = outputSpec(options.outputSchema);
    }
    if (output) state.outputSchema = output.jsonSchema;
    else if (state.outputSchema) output = outputSpec(state.outputSchema, "The run state's outputSchema");
    // A child has its tree's budget (whose time limit reaches it through its signal).
    const budget = link
      ? link.parent.root.budget
      : options.budget
        ? { ...o.budget, ...options.budget }
        : (o.budget ?? NO_BUDGET);
    if (options.budget || link) this.checkBudget(budget);
    // Node fires a timer longer than 2^31-1 ms (24.8 days) at once: such a limit is no limit.
    const { timeoutMs } = budget;
    const timer = timeoutMs && timeoutMs <= 2 ** 31 - 1 && !link ? AbortSignal.timeout(timeoutMs) : undefined;
    const own = new AbortController();
    const { signal } = options;
    // A run with nothing of its own (most) shares the agent's options: one object for all its runs.
    const plain = !options.budget && options.instructions === undefined && output === this.output;
    let loop: LoopOptions;
    const client = state.clientTools;
    if (link) loop = this.childLoop(output, budget, link, state);
    else if (plain && this.fixedTools && !client)
      loop = this.shared ??= this.loopOptions(output, budget, undefined);
    else loop = this.loopOptions(output, budget, options.instructions);
    if (client) {
      loop.tools = [...loop.tools, ...client.map(clientTool)];
      loop.toolChoice = options.toolChoice;
      loop.parallelToolCalls = options.parallelToolCalls;
    }
    const { tree, checkpoint } = treeOf(state, link, loop, o.maxDepth, options.checkpoint);
    const runSignal =
      signal && timer
        ? AbortSignal.any([own.signal, signal, timer])
        : signal || timer
          ? AbortSignal.any([own.signal, (signal ?? timer) as AbortSignal])
          : own.signal;
    const run = startRun(loop, runSignal, checkpoint, runSignal === own.signal);
    run.tree = tree;
    run.recorder = this.recorder;
    run.trace = traceRun(link ? this.tracingAs(link.agent) : this.tracing, state, this.redact?.text);
    if (run.trace) run.streamOptions = { signal: runSignal, attempts: run.trace };
    return new RunHandle<Output>(state, run, own, o.onEvent);
  }

  /**
   * The tracing of its runs as the sub-agent `name`: named so (`invoke_agent <name>`) unless the
   * agent has a `name` of its own. One per name, made by its first run.
   */
  private tracingAs(name: string): AgentTracing {
    if (this.options.name !== undefined) return this.tracing;
    let tracing = this.childTracings.get(name);
    if (!tracing) {
      tracing = { ...this.tracing, name, shared: undefined };
      this.childTracings.set(name, tracing);
    }
    return tracing;
  }

  /** A sub-agent run's options: the tree's `onApproval`; without one, shared by its runs as a top-level run's are. */
  private childLoop(
    output: OutputSpec | undefined,
    budget: Budget,
    link: ChildLink,
    state: RunState,
  ): LoopOptions {
    const onApproval = childApproval(link, state);
    const shared = !onApproval && output === this.output && this.fixedTools;
    const found = shared ? this.childShared.get(budget) : undefined;
    if (found) return found;
    const loop = { ...this.loopOptions(output, budget, undefined), onApproval };
    if (shared) this.childShared.set(budget, loop);
    return loop;
  }

  /**
   * The loop's options of a run. Every key is written, in one order (no conditional spreads): the
   * object is then one allocation with its fields inside, not a base plus a separate property store.
   */
  private loopOptions(
    output: OutputSpec | undefined,
    budget: Budget,
    instructions: string | undefined,
  ): LoopOptions {
    const o = this.options;
    return {
      model: this.model,
      instructions: joinInstructions(o.instructions, instructions),
      mode: o.mode ?? "natural",
      toolProtocol: o.toolProtocol ?? "native",
      tools: output && !this.output ? this.toolsFor(output) : this.tools,
      maxIterations: o.maxIterations ?? DEFAULTS.maxIterations,
      toolConcurrency: o.toolConcurrency ?? DEFAULTS.toolConcurrency,
      toolTimeoutMs: o.toolTimeoutMs ?? DEFAULTS.toolTimeoutMs,
      maxToolResultChars: o.maxToolResultChars ?? DEFAULTS.maxToolResultChars,
      maxImageBytes: o.maxImageBytes ?? DEFAULT_MAX_MEDIA_BYTES,
      output,
      circuitBreakerThreshold: o.circuitBreakerThreshold ?? DEFAULTS.circuitBreakerThreshold,
      repetitionThreshold: o.repetitionThreshold ?? DEFAULTS.repetitionThreshold,
      budget,
      context: this.context,
      compaction: this.compaction,
      price: this.price,
      redact: this.redact,
      toolChoice: undefined,
      parallelToolCalls: undefined,
      onApproval: o.onApproval,
    };
  }
}

/**
 * An agent whatever its output schema, for code that reads its answers as text (`result.text`,
 * `turn_complete.output`): the server, the CLI.
 */
const NO_BUDGET: Budget = Object.freeze({});

/** The agent's instructions, then the run's, a blank line apart (either may be absent or empty). */
function joinInstructions(agent: string | undefined, run: string | undefined): string {
  return agent && run ? `${agent}\n\n${run}` : agent || run || "";
}

// biome-ignore lint/suspicious/noExplicitAny: any output type; its readers use only `text`
export type AnyAgent = Agent<any>;

/** The loop's context from `options.context`, which the built-in pruning's options cannot go with. */
function ownContext(options: AgentOptions<OutputSchema | undefined>): LoopContext {
  const { context } = options;
  const taken = (["maxContextTokens", "contextStrategy", "summarizer"] as const).find(
    (name) => options[name] !== undefined,
  );
  if (taken) {
    throw new AgentloopError(
      "invalid_option",
      `${taken} goes with the built-in pruning, which context replaces: pass it to contextManager({ ... }) and that as context, or drop one of the two.`,
    );
  }
  if (typeof context !== "function" && (typeof context !== "object" || typeof context?.fit !== "function")) {
    throw new AgentloopError(
      "invalid_option",
      "context must be a function (history, { system, tools, signal }) => messages, or a ContextManager such as contextManager({ modelId }).",
    );
  }
  return loopContextOf(context);
}
