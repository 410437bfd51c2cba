import { AgentloopError } from "../core/errors.js";
import type { AgentEvent, RunResult } from "../core/events.js";
import type { Message } from "../core/messages.js";
import { environmentSecrets, secretRedactor } from "../core/redact.js";
import { type ContextManager, contextManager } from "../memory/prune.js";
import type { Model } from "../models/adapter.js";
import { type ModelPrice, type PriceTable, resolvePrice } from "../models/pricing.js";
import { xmlToolProtocol } from "../models/xml-protocol.js";
import { loopBreakingTools } from "../tools/builtin/loop-breaking.js";
import type { Tool } from "../tools/tool.js";
import { runLoop } from "./loop.js";
import type { Budget, Mode, ToolProtocol } from "./prompt.js";

export interface AgentOptions {
  model: Model;
  /** The agent's instructions: the start of every system prompt. */
  instructions?: string;
  /** Tools offered to the model, in this order. Names must be unique. */
  /**
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
  /** Limits of every run (tokens, cost, time); a run's own `budget` overrides them field by field. */
  budget?: Budget;
  /**
   * Model prices (USD per million tokens), over the adapter's own (free for a local endpoint) and
   * the built-in table; used for `usage.costUsd` and cost budgets.
   */
  prices?: PriceTable;
  /** Model calls per run before it stops with `max_iterations`. Default 10. */
  maxIterations?: number;
  /** Time limit of one tool call unless the tool sets its own. Default 60,000 ms. */
  toolTimeoutMs?: number;
  /** Tool results longer than this are cut, with a visible marker. Default 32,000 characters. */
  maxToolResultChars?: number;
  /** Tool calls of one iteration in flight at once. Default 8. */
  toolConcurrency?: number;
  /**
   * Strings that must never appear in events, results or the history the model reads (API keys,
   * tokens): each verbatim occurrence in a tool result, tool progress message or error message is
   * replaced by `[REDACTED]`. Always added: the values of `OPENAI_API_KEY`, `ANTHROPIC_API_KEY` and
   * `AGENTLOOP_API_KEY` in the environment when the agent is created.
   */
  secrets?: readonly string[];
  /** Called with every event of every run before it is yielded. A throw propagates out of the run. */
  onEvent?: (event: AgentEvent) => void;
}

export interface RunOptions {
  /** Aborting ends the run with `aborted`, cancelling the model call and running tools. */
  signal?: AbortSignal;
  /** This run's limits, over the agent's `budget`. The time limit stops the run with `aborted`. */
  budget?: Budget;
  /** More instructions for this run, appended after the agent's own (e.g. a chat client's system message). */
  instructions?: string;
  /** A previous run's `messages`, to continue that conversation. Not modified. */
  history?: readonly Message[];
}

export const DEFAULTS = {
  maxIterations: 10,
  toolTimeoutMs: 60_000,
  maxToolResultChars: 32_000,
  toolConcurrency: 8,
  circuitBreakerThreshold: 3,
  repetitionThreshold: 3,
} as const;

/** An agent: instructions, a model, tools and policies. `run()` is `stream()` consumed. */
export class Agent {
  readonly options: Readonly<AgentOptions>;
  /** Every tool offered to the next run, in order: the agent's own, then the loop-breaking ones in explicit mode. */
  get tools(): readonly Tool[] {
    const own = typeof this.options.tools === "function" ? this.options.tools() : (this.options.tools ?? []);
    const tools = [...own, ...(this.options.mode === "explicit" ? loopBreakingTools() : [])];
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
  private readonly model: Model;
  private readonly price: ModelPrice | undefined;
  private readonly context: ContextManager;
  private readonly redact: ((text: string) => string) | undefined;

  constructor(options: AgentOptions) {
    const maxIterations = options.maxIterations ?? DEFAULTS.maxIterations;
    if (!Number.isInteger(maxIterations) || maxIterations < 1) {
      throw new AgentloopError(
        "invalid_option",
        `maxIterations must be a positive integer, got ${maxIterations}.`,
      );
    }
    for (const name of ["circuitBreakerThreshold", "repetitionThreshold", "toolConcurrency"] as const) {
      const value = options[name];
      if (value !== undefined && (!Number.isInteger(value) || value < 1)) {
        throw new AgentloopError("invalid_option", `${name} must be a positive integer, got ${value}.`);
      }
    }
    this.options = options;
    if (typeof options.tools !== "function") void this.tools; // fail fast on duplicate names
    this.model = options.toolProtocol === "xml" ? xmlToolProtocol(options.model) : options.model;
    this.context = contextManager({
      modelId: options.model.id,
      ...(options.maxContextTokens !== undefined && { maxContextTokens: options.maxContextTokens }),
      ...(options.contextStrategy !== undefined && { strategy: options.contextStrategy }),
      summarizer: options.summarizer ?? options.model,
    });
    this.redact = secretRedactor([...environmentSecrets(), ...(options.secrets ?? [])]);
    this.price = resolvePrice(options.model, options.prices);
    this.checkBudget(options.budget ?? {});
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

  /** Runs to a stop and returns the result. Never rejects for model or tool failures. */
  async run(input: string, options: RunOptions = {}): Promise<RunResult> {
    const events = this.stream(input, options);
    while (true) {
      const next = await events.next();
      if (next.done) return next.value;
    }
  }

  /** Streams the events of one run; the generator's return value is the `RunResult`. */
  stream(input: string, options: RunOptions = {}): AsyncGenerator<AgentEvent, RunResult> {
    const o = this.options;
    const budget = { ...o.budget, ...options.budget };
    if (options.budget) this.checkBudget(budget);
    // Node fires a timer longer than 2^31-1 ms (24.8 days) at once: such a limit is no limit.
    const { timeoutMs } = budget;
    const timer = timeoutMs && timeoutMs <= 2 ** 31 - 1 ? AbortSignal.timeout(timeoutMs) : undefined;
    const signals = [options.signal, timer];
    const active = signals.filter((s): s is AbortSignal => s !== undefined);
    const history: Message[] = [...(options.history ?? []), { role: "user", content: input }];
    const events = runLoop({
      model: this.model,
      instructions: [o.instructions, options.instructions].filter(Boolean).join("\n\n"),
      mode: o.mode ?? "natural",
      toolProtocol: o.toolProtocol ?? "native",
      tools: this.tools,
      history,
      maxIterations: o.maxIterations ?? DEFAULTS.maxIterations,
      toolConcurrency: o.toolConcurrency ?? DEFAULTS.toolConcurrency,
      toolTimeoutMs: o.toolTimeoutMs ?? DEFAULTS.toolTimeoutMs,
      maxToolResultChars: o.maxToolResultChars ?? DEFAULTS.maxToolResultChars,
      circuitBreakerThreshold: o.circuitBreakerThreshold ?? DEFAULTS.circuitBreakerThreshold,
      repetitionThreshold: o.repetitionThreshold ?? DEFAULTS.repetitionThreshold,
      budget,
      context: this.context,
      ...(this.price && { price: this.price }),
      ...(this.redact && { redact: this.redact }),
      signal: active.length === 1 ? (active[0] as AbortSignal) : AbortSignal.any(active),
    });
    // No wrapper unless someone observes: every layer of async generator costs each event a few microtasks.
    return o.onEvent ? observe(events, o.onEvent) : events;
  }
}

async function* observe(
  events: AsyncGenerator<AgentEvent, RunResult>,
  onEvent: (event: AgentEvent) => void,
): AsyncGenerator<AgentEvent, RunResult> {
  while (true) {
    const next = await events.next();
    if (next.done) return next.value;
    onEvent(next.value);
    yield next.value;
  }
}
