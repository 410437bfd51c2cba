import type { AgentEvent, RunResult } from "../core/events.js";
import type { Usage } from "../core/messages.js";
import { finishReason } from "./errors.js";

/** One `chat.completion.chunk`; `agentloop` carries an event of SPEC section 3 (clients ignore it). */
export interface Chunk {
  id: string;
  object: "chat.completion.chunk";
  created: number;
  model: string;
  choices: {
    index: 0;
    delta: { role?: "assistant"; content?: string; reasoning_content?: string };
    finish_reason: string | null;
  }[];
  usage?: ReturnType<typeof wireUsage>;
  agentloop?: AgentEvent;
}

export function wireUsage(usage: Usage) {
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
 * Turns a run's events into chunks. All assistant text streams as `content` as it is
 * generated (the narration before a tool call is part of the reply; iterations are separated
 * by a blank line); thinking streams as `reasoning_content`; tool activity travels in chunks
 * with an empty delta and the event in `agentloop`. The output of a loop-breaking tool (the
 * question of `ask_question`, ...) is not streamed text, so it is sent as content at the end.
 */
export class ChunkMapper {
  private streamedText = "";
  private iterationHasText = false;

  constructor(
    private readonly id: string,
    private readonly model: string,
    private readonly created: number,
  ) {}

  chunk(
    delta: Chunk["choices"][number]["delta"],
    extra: Partial<Chunk> = {},
    finish: string | null = null,
  ): Chunk {
    return {
      id: this.id,
      object: "chat.completion.chunk",
      created: this.created,
      model: this.model,
      choices: [{ index: 0, delta, finish_reason: finish }],
      ...extra,
    };
  }

  /** The chunks for one event (none for events that carry nothing for the client). */
  map(event: AgentEvent): Chunk[] {
    switch (event.type) {
      case "iteration_start":
        this.iterationHasText = false;
        return [];
      case "message_delta": {
        const separator = !this.iterationHasText && this.streamedText !== "" ? "\n\n" : "";
        this.iterationHasText = true;
        this.streamedText += separator + event.text;
        return [this.chunk({ content: separator + event.text })];
      }
      case "thinking":
        return [this.chunk({ reasoning_content: event.text })];
      case "message":
        return [];
      case "tool_call":
      case "tool_progress":
      case "tool_result":
      case "error":
        return event.type === "error" ? [] : [this.chunk({}, { agentloop: event })];
      case "turn_complete":
        return [];
    }
  }

  /** The closing chunks: any output not streamed yet, then the finish chunk carrying `turn_complete`. */
  finish(result: RunResult, event: AgentEvent | undefined, includeUsage: boolean): Chunk[] {
    const chunks: Chunk[] = [];
    if (result.output !== "" && !this.streamedText.endsWith(result.output)) {
      const separator = this.streamedText === "" ? "" : "\n\n";
      chunks.push(this.chunk({ content: separator + result.output }));
    }
    const reason = finishReason(result.stopReason);
    if (reason === undefined) {
      const error = {
        type: "error" as const,
        message: result.error?.message ?? result.stopReason,
        code: result.error?.code ?? result.stopReason,
      };
      chunks.push(this.chunk({}, { agentloop: error }, "stop"));
    } else {
      chunks.push(this.chunk({}, event ? { agentloop: event } : {}, reason));
    }
    if (includeUsage) chunks.push({ ...this.chunk({}), choices: [], usage: wireUsage(result.usage) });
    return chunks;
  }

  /** Whether anything reached the client yet. */
  get started(): boolean {
    return this.streamedText !== "";
  }
}
