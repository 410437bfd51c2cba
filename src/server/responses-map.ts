import type { AgentEvent, RunResult } from "../core/events.js";
import type { Usage } from "../core/messages.js";
import { clientCallsOf, type WireToolCall } from "./client-tools.js";
import { finishReason } from "./errors.js";
import { type ErrorEvent, RunTranscript } from "./map-events.js";
import type { RunWire, SSEItem } from "./respond.js";

/** One Responses API stream event; `agentloop` carries an event of SPEC section 3 (clients ignore it). */
export interface ResponseEvent {
  type: string;
  sequence_number: number;
  agentloop?: AgentEvent;
  [field: string]: unknown;
}

/** The Responses API `usage` object. */
interface ResponsesUsage {
  input_tokens: number;
  input_tokens_details: { cached_tokens: number };
  output_tokens: number;
  output_tokens_details: { reasoning_tokens: number };
  total_tokens: number;
}

export function responsesUsage(usage: Usage): ResponsesUsage {
  return {
    input_tokens: usage.inputTokens,
    input_tokens_details: { cached_tokens: usage.cachedInputTokens ?? 0 },
    output_tokens: usage.outputTokens,
    output_tokens_details: { reasoning_tokens: usage.reasoningTokens ?? 0 },
    total_tokens: usage.inputTokens + usage.outputTokens,
  };
}

/** What the response object says about the request, besides its output. */
export interface ResponseBase {
  /** `resp_...`: the run's id. */
  id: string;
  model: string;
  createdAt: number;
  instructions: string | null;
  previousResponseId: string | null;
  /** Whether the run is stored (addressable by `previous_response_id`). */
  store: boolean;
  /** The request's `text` (its format), echoed; default `{ format: { type: "text" } }`. */
  text?: { format: unknown };
  /** The run has an output schema: its text is only the validated answer's JSON (see `ChunkMapper`). */
  typed?: boolean;
  /** Fields of the request the response object repeats (`temperature`, `tools`, `tool_choice`, ...), over the defaults. */
  echo?: Record<string, unknown>;
  /** The names of the client's own tools: their calls come as `function_call` items at the end, not as tool activity. */
  clientTools?: ReadonlySet<string>;
}

type Part = { type: "output_text"; text: string; annotations: []; logprobs: [] };
type Item =
  | { id: string; type: "message"; role: "assistant"; status: string; content: Part[] }
  | { id: string; type: "reasoning"; summary: []; content: { type: "reasoning_text"; text: string }[] };
/** A call of one of the client's tools, which the run waits on (SPEC section 14). */
type CallItem = {
  id: string;
  type: "function_call";
  status: "in_progress" | "completed";
  call_id: string;
  name: string;
  arguments: string;
};

/**
 * Turns one run's events into Responses API stream events (`response.created`, output items with
 * their deltas, `response.completed`), the way `ChunkMapper` does for chat completions.
 *
 * - Each iteration's thinking is a `reasoning` item (`reasoning_text` deltas), its text a
 *   `message` item (`output_text` deltas), closed when the iteration's `message` event comes. A
 *   message after earlier text starts with a blank line, so the response's `output_text` is the
 *   chat completion's content.
 * - `tool_call`, `tool_progress`, `tool_result`, `approval_request` and non-fatal `error` events
 *   travel in `keepalive` events (which clients and the official SDK's stream helpers skip) whose
 *   extra field `agentloop` holds the event.
 * - The output of a loop-breaking tool, and the line naming the calls a run stopped on
 *   `approval_required` waits for, come as a last message item.
 * - A run that waits on the client's own tools (SPEC section 14) ends with their calls as
 *   `function_call` items (`function_call_arguments` delta and done events, the arguments whole),
 *   and `response.completed`; the `tool_call` events of those calls are not sent as tool activity.
 * - A run with an output schema (`typed`) streams no text: its message is the validated answer's
 *   JSON, sent at the end, as for chat completions.
 * - The end: `response.completed` whose `agentloop` is the `turn_complete` event; for the stops
 *   chat completions call `length` (`max_iterations`, `budget_exceeded`, `aborted`),
 *   `response.incomplete` (`incomplete_details.reason` `max_output_tokens`); for the error stops
 *   (`circuit_breaker`, `model_error`) and a run cut at shutdown, a `keepalive` with the
 *   `turn_complete` event, then `response.failed` whose `agentloop` is the `error` event.
 */
export class ResponsesMapper implements RunWire<ResponseEvent> {
  private sequence = 0;
  private readonly output: (Item | CallItem)[] = [];
  /** The item deltas go to, while one is open. */
  private current: Item | undefined;
  private openText = "";
  /** The text and end of the run; its `text` is the response's `output_text`. */
  private readonly run: RunTranscript;

  /** Numbered first, though sent only once the headers go (events may be mapped before). */
  private readonly opening: ResponseEvent[];

  constructor(private readonly base: ResponseBase) {
    this.run = new RunTranscript(base.typed === true);
    const snapshot = this.response("in_progress", { output: [], output_text: "" });
    this.opening = [
      this.event("response.created", { response: snapshot }),
      this.event("response.in_progress", { response: snapshot }),
    ];
  }

  private event(type: string, fields: Record<string, unknown> = {}): ResponseEvent {
    return { type, sequence_number: this.sequence++, ...fields };
  }

  /** The response object: `status`, the output so far, and the fields the official clients read. */
  response(status: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
    const { id, model, createdAt, instructions, previousResponseId, store } = this.base;
    return {
      id,
      object: "response",
      created_at: createdAt,
      completed_at: status === "completed" ? Math.max(createdAt, Math.floor(Date.now() / 1000)) : null,
      status,
      error: null,
      incomplete_details: null,
      instructions,
      metadata: {},
      model,
      output: this.output,
      output_text: this.run.text,
      parallel_tool_calls: false,
      previous_response_id: previousResponseId,
      store,
      temperature: 1,
      text: this.base.text ?? { format: { type: "text" } },
      tool_choice: "auto",
      tools: [],
      top_p: 1,
      presence_penalty: 0,
      frequency_penalty: 0,
      top_logprobs: 0,
      reasoning: null,
      max_output_tokens: null,
      max_tool_calls: null,
      background: false,
      service_tier: "default",
      safety_identifier: null,
      prompt_cache_key: null,
      truncation: "disabled",
      usage: null,
      ...this.base.echo,
      ...extra,
    };
  }

  open(): ResponseEvent[] {
    return this.opening;
  }

  map(event: AgentEvent): ResponseEvent[] {
    // A sub-agent's events, its text included, travel in the extension field only.
    if (event.depth !== undefined) return [this.event("keepalive", { agentloop: event })];
    switch (event.type) {
      case "thinking":
        return event.text === "" ? [] : this.delta("reasoning", event.text);
      case "message_delta": {
        const text = this.run.take(event);
        return text === "" ? [] : this.delta("message", text);
      }
      case "message":
        this.run.take(event);
        return this.close();
      case "tool_call":
        if (this.base.clientTools?.has(event.name)) return this.close();
        return [...this.close(), this.event("keepalive", { agentloop: event })];
      case "tool_progress":
      case "tool_result":
      case "approval_request":
      case "compaction":
        return [...this.close(), this.event("keepalive", { agentloop: event })];
      case "iteration_start":
      case "error": // held until the end tells whether it ends the run
      case "turn_complete":
        this.run.take(event);
        return [];
    }
  }

  /** Opens an item of `kind` when another (or none) is open, then one delta into it. */
  private delta(kind: Item["type"], text: string): ResponseEvent[] {
    const events = this.current?.type === kind ? [] : [...this.close(), ...this.start(kind)];
    const item = this.current as Item;
    this.openText += text;
    const where = { item_id: item.id, output_index: this.output.length - 1, content_index: 0 };
    events.push(
      kind === "message"
        ? this.event("response.output_text.delta", { ...where, delta: text, logprobs: [] })
        : this.event("response.reasoning_text.delta", { ...where, delta: text }),
    );
    return events;
  }

  private start(kind: Item["type"]): ResponseEvent[] {
    const index = this.output.length;
    const id = `${kind === "message" ? "msg" : "rs"}_${this.base.id.replace(/^resp_/, "")}_${index}`;
    const item: Item =
      kind === "message"
        ? { id, type: "message", role: "assistant", status: "in_progress", content: [] }
        : { id, type: "reasoning", summary: [], content: [] };
    this.current = item;
    this.openText = "";
    this.output.push(item);
    const part = kind === "message" ? messagePart("") : { type: "reasoning_text", text: "" };
    return [
      this.event("response.output_item.added", { output_index: index, item: structuredClone(item) }),
      this.event("response.content_part.added", { item_id: id, output_index: index, content_index: 0, part }),
    ];
  }

  /** Closes the open item: its done events, the item complete in the output. */
  private close(): ResponseEvent[] {
    const item = this.current;
    if (!item) return [];
    this.current = undefined;
    const text = this.openText;
    const where = { item_id: item.id, output_index: this.output.length - 1, content_index: 0 };
    let events: ResponseEvent[];
    if (item.type === "message") {
      item.content = [messagePart(text)];
      item.status = "completed";
      events = [
        this.event("response.output_text.done", { ...where, text, logprobs: [] }),
        this.event("response.content_part.done", { ...where, part: messagePart(text) }),
      ];
    } else {
      item.content = [{ type: "reasoning_text", text }];
      events = [
        this.event("response.reasoning_text.done", { ...where, text }),
        this.event("response.content_part.done", { ...where, part: { type: "reasoning_text", text } }),
      ];
    }
    events.push(
      this.event("response.output_item.done", {
        output_index: where.output_index,
        item: structuredClone(item),
      }),
    );
    return events;
  }

  finish(result: RunResult, cut?: ErrorEvent): ResponseEvent[] {
    const events = this.closeWithTail(result);
    const { run } = this;
    const complete = run.turnComplete(result);
    const usage = responsesUsage(result.usage);
    const reason = finishReason(result.stopReason);
    if (cut || reason === undefined) {
      const error = cut ?? run.stopError(result);
      if (cut && run.error) events.push(this.event("keepalive", { agentloop: run.error }));
      const failed = this.response("failed", { error: { code: error.code, message: error.message }, usage });
      events.push(
        this.event("keepalive", { agentloop: complete }),
        this.event("response.failed", { response: failed, agentloop: error }),
      );
      return events;
    }
    if (run.error) events.push(this.event("keepalive", { agentloop: run.error }));
    const type = reason === "length" ? "response.incomplete" : "response.completed";
    events.push(this.event(type, { response: this.final(result), agentloop: complete }));
    return events;
  }

  /** The response of a run that did not end on an error stop, with its `turn_complete` event as `agentloop`. */
  whole(result: RunResult): Record<string, unknown> {
    this.closeWithTail(result);
    return { ...this.final(result), agentloop: this.run.turnComplete(result) };
  }

  /**
   * Closes the open item, then sends what ends the text (`RunTranscript.tail`) as a last message
   * item, then the client's calls the run waits on as `function_call` items.
   */
  private closeWithTail(result: RunResult): ResponseEvent[] {
    const events = this.close();
    const tail = this.run.tail(result);
    if (tail !== "") {
      this.run.text += tail;
      events.push(...this.delta("message", tail), ...this.close());
    }
    for (const call of clientCallsOf(result)) events.push(...this.callItem(call));
    return events;
  }

  /** A call of the client's tools as an output item, with its events (its arguments in one delta). */
  private callItem(call: WireToolCall): ResponseEvent[] {
    const index = this.output.length;
    const id = `fc_${this.base.id.replace(/^resp_/, "")}_${index}`;
    const item: CallItem = {
      id,
      type: "function_call",
      status: "in_progress",
      call_id: call.id,
      name: call.name,
      arguments: "",
    };
    this.output.push(item);
    const where = { item_id: id, output_index: index };
    const events = [this.event("response.output_item.added", { output_index: index, item: { ...item } })];
    events.push(this.event("response.function_call_arguments.delta", { ...where, delta: call.arguments }));
    item.arguments = call.arguments;
    item.status = "completed";
    events.push(
      this.event("response.function_call_arguments.done", {
        ...where,
        name: call.name,
        arguments: call.arguments,
      }),
      this.event("response.output_item.done", { output_index: index, item: { ...item } }),
    );
    return events;
  }

  private final(result: RunResult): Record<string, unknown> {
    const incomplete = finishReason(result.stopReason) === "length";
    return this.response(incomplete ? "incomplete" : "completed", {
      usage: responsesUsage(result.usage),
      ...(incomplete && { incomplete_details: { reason: "max_output_tokens" } }),
    });
  }

  failed(error: ErrorEvent): ResponseEvent[] {
    const response = this.response("failed", { error: { code: error.code, message: error.message } });
    return [this.event("response.failed", { response, agentloop: error })];
  }

  sse(item: ResponseEvent): SSEItem {
    return { event: item.type, data: JSON.stringify(item) };
  }
}

function messagePart(text: string): Part {
  return { type: "output_text", text, annotations: [], logprobs: [] };
}
