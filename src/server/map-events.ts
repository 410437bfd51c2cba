import { type AgentEvent, type PendingApproval, type RunResult, stopOutcomeOf } from "../core/events.js";
import type { Usage } from "../core/messages.js";
import { clientCallsOf, type WireToolCall } from "./client-tools.js";
import { finishReason } from "./errors.js";

type TurnComplete = Extract<AgentEvent, { type: "turn_complete" }>;
export type ErrorEvent = Extract<AgentEvent, { type: "error" }>;

/** OpenAI's `usage` object. */
export interface WireUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details?: { cached_tokens: number };
  completion_tokens_details?: { reasoning_tokens: number };
}

/** One `chat.completion.chunk`; `agentloop` carries an event of SPEC section 3 (clients ignore it). */
export interface Chunk {
  id: string;
  object: "chat.completion.chunk";
  created: number;
  model: string;
  choices: {
    index: 0;
    delta: { role?: "assistant"; content?: string; reasoning_content?: string; tool_calls?: WireCallDelta[] };
    finish_reason: FinishReason | null;
  }[];
  usage?: WireUsage;
  agentloop?: AgentEvent;
}

type FinishReason = "stop" | "length" | "tool_calls";

/** One of the client's tool calls in a chunk (whole: a paused run has it complete). */
interface WireCallDelta {
  index: number;
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

/** One of the client's tool calls in a `chat.completion` message. */
interface WireCall {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

const wireCall = (call: WireToolCall): WireCall => ({
  id: call.id,
  type: "function",
  function: { name: call.name, arguments: call.arguments },
});

/** A non-streaming `chat.completion`; `agentloop` is the run's `turn_complete` event. */
export interface Completion {
  id: string;
  object: "chat.completion";
  created: number;
  model: string;
  choices: {
    index: 0;
    message: {
      role: "assistant";
      content: string;
      refusal: null;
      reasoning_content?: string;
      tool_calls?: WireCall[];
    };
    finish_reason: FinishReason;
    logprobs: null;
  }[];
  usage: WireUsage;
  agentloop: TurnComplete;
}

/** `Waiting for approval: write_file({"path":"a.txt"}) [call_1], ...`: the calls a run waits for, arguments cut at 200 characters. */
function waitingFor(calls: readonly PendingApproval[]): string {
  const shown = calls.map(({ id, name, arguments: args }) => {
    const json = JSON.stringify(args);
    return `${name}(${json.length > 200 ? `${json.slice(0, 200)}…` : json}) [${id}]`;
  });
  return `Waiting for approval: ${shown.join(", ")}`;
}

function wireUsage(usage: Usage): WireUsage {
  return {
    prompt_tokens: usage.inputTokens,
    completion_tokens: usage.outputTokens,
    total_tokens: usage.inputTokens + usage.outputTokens,
    ...(usage.cachedInputTokens !== undefined && {
      prompt_tokens_details: { cached_tokens: usage.cachedInputTokens },
    }),
    ...(usage.reasoningTokens !== undefined && {
      completion_tokens_details: { reasoning_tokens: usage.reasoningTokens },
    }),
  };
}

/**
 * What both wires (`ChunkMapper`, `ResponsesMapper`) keep of a run's text and its end, and the
 * decisions about the end, written once: the text streamed so far (each iteration's after a
 * blank line), the `error` events held until the run's end tells whether one ends it, what ends
 * the text (`tail`), the `turn_complete` event to send, the error of an error stop.
 */
export class RunTranscript {
  /** All assistant text streamed so far. */
  text = "";
  private iterationHasText = false;
  /** The full text of the last `message` event (an answer streamed as it was generated). */
  private lastMessage = "";
  private complete: TurnComplete | undefined;
  /** The last `error` event, held until the run's end. */
  error: ErrorEvent | undefined;

  /** `typed`: the run has an output schema, so it streams no text (its answer's JSON comes in the tail). */
  constructor(readonly typed: boolean) {}

  /**
   * Takes what `event` tells of the text and the end. For a `message_delta`, returns the text to
   * stream (after a blank line when it starts an iteration's text), or "" for none; else "".
   */
  take(event: AgentEvent): string {
    switch (event.type) {
      case "iteration_start":
        this.iterationHasText = false;
        return "";
      case "message_delta": {
        if (event.text === "" || this.typed) return "";
        const text = !this.iterationHasText && this.text !== "" ? `\n\n${event.text}` : event.text;
        this.iterationHasText = true;
        this.text += text;
        return text;
      }
      case "message":
        this.lastMessage = event.content;
        return "";
      case "error":
        this.error = event;
        return "";
      case "turn_complete":
        this.complete = event;
        return "";
      default:
        return "";
    }
  }

  /**
   * What ends the text, with its separator: the run's output when it was not streamed as text (a
   * loop-breaking tool's, a typed run's JSON), and the calls a run stopped on `approval_required`
   * waits for.
   */
  tail(result: RunResult): string {
    const parts: string[] = [];
    if (this.typed) {
      if (result.output !== undefined && result.text !== "") parts.push(result.text);
    } else {
      // A final answer was streamed as it came.
      const streamed = result.stopReason === "final_answer" && this.lastMessage !== "";
      if (!streamed && result.text !== "" && !this.text.endsWith(result.text)) parts.push(result.text);
    }
    if (result.pendingApprovals?.length) parts.push(waitingFor(result.pendingApprovals));
    if (parts.length === 0) return "";
    return (this.text === "" ? "" : "\n\n") + parts.join("\n\n");
  }

  /** The run's `turn_complete` event: the one it sent, or one made from its result. */
  turnComplete(result: RunResult): TurnComplete {
    return (
      this.complete ?? {
        type: "turn_complete",
        ...stopOutcomeOf(result),
        iterations: result.iterations,
        output: result.text,
        usage: result.usage,
        runId: result.runId,
      }
    );
  }

  /** The `error` event that ends a run stopped on an error: the one it sent, or one made from its result. */
  stopError(result: RunResult): ErrorEvent {
    return (
      this.error ?? {
        type: "error",
        message: result.error?.message ?? `The run stopped: ${result.stopReason}.`,
        code: result.error?.code ?? result.stopReason,
        runId: result.runId,
      }
    );
  }
}

/**
 * Turns one run's events into OpenAI chunks; pure apart from what it remembers of the run.
 *
 * - Content: all assistant text streams as `delta.content` as it is generated, the narration
 *   before a tool call included ("Let me look that up."), because an iteration's text cannot be
 *   known to be the final answer until the model has finished it; iterations are separated by
 *   a blank line. The non-streaming `content` is the same text, so both modes answer alike.
 * - Thinking streams as `delta.reasoning_content` (the DeepSeek/vLLM convention).
 * - `tool_call`, `tool_progress`, `tool_result` and non-fatal `error` events travel in chunks
 *   with an empty delta and the event in `agentloop`.
 * - The output of a loop-breaking tool (the question of `ask_question`, the result of
 *   `task_completion`) was never streamed text, so it is sent as content at the end; so is the
 *   line naming the calls a run stopped on `approval_required` waits for.
 * - A run with an output schema (`typed`) streams no text: its content is the validated answer's
 *   JSON, sent at the end (nothing for a run that ended without one), so a client parsing it
 *   never reads narration or a rejected answer.
 * - A run that waits on the client's own tools (SPEC section 14) sends their calls in one chunk's
 *   `delta.tool_calls`, whole, before the end, whose `finish_reason` is `tool_calls`.
 * - The end: the `turn_complete` chunk carries `finish_reason`. For the error stops
 *   (`circuit_breaker`, `model_error`) the `turn_complete` chunk comes first and the last
 *   chunk is the `error` event, carrying `finish_reason: "stop"` so clients that require one
 *   still close the choice.
 */
export class ChunkMapper {
  private thinking = "";
  private readonly run: RunTranscript;

  constructor(
    private readonly id: string,
    private readonly model: string,
    private readonly created: number,
    typed = false,
  ) {
    this.run = new RunTranscript(typed);
  }

  chunk(
    delta: Chunk["choices"][number]["delta"],
    agentloop?: AgentEvent,
    finish: Chunk["choices"][number]["finish_reason"] = null,
  ): Chunk {
    const chunk: Chunk = {
      id: this.id,
      object: "chat.completion.chunk",
      created: this.created,
      model: this.model,
      choices: [{ index: 0, delta, finish_reason: finish }],
    };
    if (agentloop) chunk.agentloop = agentloop;
    return chunk;
  }

  /** The chunks for one event, in order; none for events that carry nothing for the client yet. */
  map(event: AgentEvent): Chunk[] {
    // A sub-agent's events, its text included, travel in the extension field only.
    if (event.depth !== undefined) return [this.chunk({}, event)];
    switch (event.type) {
      case "message_delta": {
        const text = this.run.take(event);
        return text === "" ? [] : [this.chunk({ content: text })];
      }
      case "thinking":
        this.thinking += event.text;
        return event.text === "" ? [] : [this.chunk({ reasoning_content: event.text })];
      case "tool_call":
      case "tool_progress":
      case "tool_result":
      case "approval_request":
      case "compaction":
        return [this.chunk({}, event)];
      case "iteration_start":
      case "message":
      case "error": // held until the end tells whether it ends the run (then it is the last chunk)
      case "turn_complete":
        this.run.take(event);
        return [];
    }
  }

  /**
   * The closing chunks: output not streamed yet, the end of the run, then usage when asked.
   * `cut` is the error that ended the run from outside (the server's shutdown deadline): the
   * stream then ends like an error stop, with that error as the last chunk.
   */
  finish(result: RunResult, includeUsage: boolean, cut?: ErrorEvent): Chunk[] {
    const chunks: Chunk[] = [];
    const { run } = this;
    const tail = run.tail(result);
    if (tail !== "") chunks.push(this.chunk({ content: tail }));
    const calls = clientCallsOf(result);
    if (calls.length > 0)
      chunks.push(this.chunk({ tool_calls: calls.map((call, index) => ({ index, ...wireCall(call) })) }));
    const complete = run.turnComplete(result);
    const reason = finishReason(result.stopReason);
    if (cut) {
      if (run.error) chunks.push(this.chunk({}, run.error));
      chunks.push(this.chunk({}, complete), this.chunk({}, cut, "stop"));
    } else if (reason === undefined) {
      chunks.push(this.chunk({}, complete), this.chunk({}, run.stopError(result), "stop"));
    } else {
      if (run.error) chunks.push(this.chunk({}, run.error));
      chunks.push(this.chunk({}, complete, reason));
    }
    if (includeUsage) chunks.push({ ...this.chunk({}), choices: [], usage: wireUsage(result.usage) });
    return chunks;
  }

  /**
   * The non-streaming answer of a run that did not end on an error stop, with the same content
   * the stream would have sent. Call after every event was mapped.
   */
  completion(result: RunResult, reason: FinishReason): Completion {
    const calls = clientCallsOf(result);
    return {
      id: this.id,
      object: "chat.completion",
      created: this.created,
      model: this.model,
      choices: [
        {
          index: 0,
          message: {
            role: "assistant",
            content: this.run.text + this.run.tail(result),
            refusal: null,
            ...(this.thinking !== "" && { reasoning_content: this.thinking }),
            ...(calls.length > 0 && { tool_calls: calls.map(wireCall) }),
          },
          finish_reason: reason,
          logprobs: null,
        },
      ],
      usage: wireUsage(result.usage),
      agentloop: this.run.turnComplete(result),
    };
  }
}
