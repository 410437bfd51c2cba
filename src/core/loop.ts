import type { Model, ModelError, ModelReply, ToolSpec } from "../models/adapter.js";
import { type CallOutcome, executeCalls, type PreparedCall, prepareCall } from "../tools/execute.js";
import type { Tool } from "../tools/tool.js";
import type { AgentEvent, RunResult, StopReason } from "./events.js";
import { type AssistantMessage, addUsage, emptyUsage, type Message } from "./messages.js";

/** Everything the loop needs, passed in. Defaults are applied by `Agent`. */
export interface LoopOptions {
  model: Model;
  /** The system prompt, assembled once per run. */
  system: string;
  /** Tools in the order they are offered to the model. */
  tools: readonly Tool[];
  /** The conversation so far, ending with the new user message. The loop appends to it. */
  history: Message[];
  maxIterations: number;
  toolConcurrency: number;
  toolTimeoutMs: number;
  maxToolResultChars: number;
  signal: AbortSignal;
}

/**
 * The agent loop: an explicit iteration of model call, then the tool calls it asked for,
 * until a stop condition. Yields the events of SPEC section 3 and returns the run's result.
 * Never throws for model or tool failures: they end the run with a stop reason or become
 * error results the model reads.
 */
export async function* runLoop(options: LoopOptions): AsyncGenerator<AgentEvent, RunResult> {
  const { model, history, signal } = options;
  const tools = new Map(options.tools.map((tool) => [tool.name, tool]));
  const specs: ToolSpec[] = options.tools.map(({ name, description, parameters }) => ({
    name,
    description,
    parameters,
  }));
  const usage = emptyUsage();
  let iterations = 0;
  let output = "";

  const finish = (stopReason: StopReason, error?: ModelError): RunResult => ({
    output,
    stopReason,
    iterations,
    messages: history,
    usage,
    ...(error && { error: { message: error.message, code: error.code } }),
  });

  while (true) {
    if (signal.aborted) return yield* complete(finish("aborted"));
    if (iterations >= options.maxIterations) return yield* complete(finish("max_iterations"));
    iterations++;
    yield { type: "iteration_start", iteration: iterations };

    let reply: ModelReply | undefined;
    let failure: ModelError | undefined;
    for await (const event of model.stream(
      { system: options.system, messages: history, tools: specs },
      { signal },
    )) {
      if (event.type === "text_delta") yield { type: "message_delta", text: event.text };
      else if (event.type === "thinking_delta") yield { type: "thinking", text: event.text };
      else if (event.type === "done") reply = event.message;
      else failure = event.error;
    }
    if (signal.aborted || failure?.code === "aborted") return yield* complete(finish("aborted"));
    if (!reply) {
      const error = failure ?? {
        message: "The model stream ended without a reply.",
        code: "invalid_response",
      };
      yield { type: "error", message: error.message, code: error.code };
      return yield* complete(finish("model_error", error));
    }

    addUsage(usage, reply.usage);
    const assistant: AssistantMessage = { role: "assistant", content: reply.content };
    if (reply.thinking) assistant.thinking = reply.thinking;
    if (reply.toolCalls.length > 0) assistant.toolCalls = reply.toolCalls;
    history.push(assistant);
    output = reply.content;
    yield { type: "message", content: reply.content };

    if (reply.toolCalls.length === 0) return yield* complete(finish("final_answer"));

    const prepared: PreparedCall[] = reply.toolCalls.map((call, index) => prepareCall(call, index, tools));
    for (const { call, arguments: args } of prepared) {
      yield { type: "tool_call", id: call.id, name: call.name, arguments: args };
    }
    const outcomes: CallOutcome[] = new Array(prepared.length);
    const execution = executeCalls(prepared, {
      signal,
      concurrency: options.toolConcurrency,
      timeoutMs: options.toolTimeoutMs,
      maxResultChars: options.maxToolResultChars,
    });
    for await (const outcome of execution) {
      outcomes[outcome.index] = outcome;
      const { id, name } = reply.toolCalls[outcome.index] as (typeof reply.toolCalls)[number];
      const { content, isError, durationMs } = outcome;
      yield { type: "tool_result", id, name, content, isError, durationMs };
    }
    // Results go back in call order, whatever order they finished in.
    let breaker: CallOutcome | undefined;
    for (const outcome of outcomes) {
      const call = reply.toolCalls[outcome.index] as (typeof reply.toolCalls)[number];
      history.push({
        role: "tool",
        toolCallId: call.id,
        name: call.name,
        content: outcome.content,
        isError: outcome.isError,
      });
      if (outcome.breaksLoop && !breaker) breaker = outcome;
    }

    if (signal.aborted) return yield* complete(finish("aborted"));
    if (breaker) {
      output = breaker.content;
      return yield* complete(finish(stopReasonOf(reply.toolCalls[breaker.index]?.name)));
    }
  }
}

/** Built-in loop-breaking tools stop with their own reason; user tools count as task completion. */
function stopReasonOf(toolName: string | undefined): StopReason {
  return toolName === "ask_question" || toolName === "converse" ? toolName : "task_completion";
}

async function* complete(result: RunResult): AsyncGenerator<AgentEvent, RunResult> {
  const { stopReason, iterations, output, usage } = result;
  yield { type: "turn_complete", stopReason, iterations, output, usage: { ...usage } };
  return result;
}
