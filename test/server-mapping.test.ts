import { describe, expect, it } from "vitest";
import { newRunState } from "../src/agent/state.js";
import { stopOutcomeOf } from "../src/core/events.js";
import type { AgentEvent, AgentEventBody, RunResult, StopReason } from "../src/index.js";
import { finishReason } from "../src/server/errors.js";
import { ChunkMapper } from "../src/server/map-events.js";
import { chatRequestSchema, toRunInput } from "../src/server/openai-compat.js";

const usage = { inputTokens: 3, outputTokens: 4 };
const result = (stopReason: StopReason, output: string, error?: RunResult["error"]): RunResult => ({
  runId: "run_1",
  state: newRunState("run_1", []),
  output,
  text: output,
  ...(stopReason === "approval_required" ? { stopReason, pendingApprovals: [] } : { stopReason }),
  iterations: 2,
  messages: [],
  usage,
  steps: [],
  ...(error && { error }),
});
const complete = (r: RunResult): AgentEventBody => ({
  type: "turn_complete",
  ...stopOutcomeOf(r),
  iterations: r.iterations,
  output: r.output,
  usage,
});

/** Maps `events` and then finishes with `r`; returns the content and each chunk's event type. */
function mapRun(events: AgentEventBody[], r: RunResult, includeUsage = false) {
  const mapper = new ChunkMapper("chatcmpl-1", "m", 0);
  const chunks = [...events, complete(r)].flatMap((e) => mapper.map({ ...e, runId: "run_1" } as AgentEvent));
  chunks.push(...mapper.finish(r, includeUsage));
  return {
    mapper,
    chunks,
    content: chunks.map((c) => c.choices[0]?.delta.content ?? "").join(""),
    events: chunks.map(
      (c) => c.agentloop?.type ?? (c.usage ? "usage" : c.choices[0]?.delta.content ? "text" : "?"),
    ),
  };
}

describe("ChunkMapper", () => {
  const toolIteration: AgentEventBody[] = [
    { type: "iteration_start", iteration: 1 },
    { type: "message_delta", text: "Let me " },
    { type: "message_delta", text: "look." },
    { type: "message", content: "Let me look." },
    { type: "tool_call", id: "c1", name: "search", arguments: { q: "x" } },
    { type: "tool_result", id: "c1", name: "search", content: "found", isError: false, durationMs: 1 },
    { type: "iteration_start", iteration: 2 },
  ];

  it("streams every iteration's text as content, separated by a blank line, like the non-streaming answer", () => {
    const r = result("final_answer", "It is x.");
    const run = mapRun([...toolIteration, { type: "message_delta", text: "It is x." }], r, true);
    expect(run.content).toBe("Let me look.\n\nIt is x.");
    expect(run.events).toEqual([
      "text",
      "text",
      "tool_call",
      "tool_result",
      "text",
      "turn_complete",
      "usage",
    ]);
    expect(run.chunks.at(-2)?.choices[0]?.finish_reason).toBe("stop");
    expect(run.chunks.at(-1)).toMatchObject({
      choices: [],
      usage: { prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 },
    });
    expect(run.mapper.completion(r, "stop").choices[0]?.message.content).toBe(run.content);
  });

  it("sends a loop-breaking tool's output, never streamed, as content at the end", () => {
    const r = result("ask_question", "Which city?");
    const run = mapRun(toolIteration, r);
    expect(run.content).toBe("Let me look.\n\nWhich city?");
    expect(run.mapper.completion(r, "stop").choices[0]?.message.content).toBe("Let me look.\n\nWhich city?");
  });

  it("ends an error stop with turn_complete and then the error event; a non-fatal error comes before the end", () => {
    const error = { message: "boom", code: "http_500" };
    const failed = mapRun([...toolIteration, { type: "error", ...error }], result("model_error", "", error));
    expect(failed.events).toEqual(["text", "text", "tool_call", "tool_result", "turn_complete", "error"]);
    expect(failed.chunks.at(-1)?.choices[0]?.finish_reason).toBe("stop");
    expect(failed.chunks.at(-2)?.choices[0]?.finish_reason).toBeNull();

    const spent = { message: "Token budget spent.", code: "budget_exceeded" };
    const budget = mapRun(
      [...toolIteration, { type: "error", ...spent }],
      result("budget_exceeded", "", spent),
    );
    expect(budget.events.slice(-2)).toEqual(["error", "turn_complete"]);
    expect(budget.chunks.at(-1)?.choices[0]?.finish_reason).toBe("length");
  });

  it("sends a compaction as it happens, in the agentloop field", () => {
    const compaction: AgentEventBody = {
      type: "compaction",
      summarizedMessages: 6,
      tokensBefore: 900,
      tokensAfter: 300,
      usage: { inputTokens: 800, outputTokens: 60 },
    };
    const run = mapRun(
      [...toolIteration, compaction, { type: "message_delta", text: "x" }],
      result("final_answer", "x"),
    );
    expect(run.events).toEqual([
      "text",
      "text",
      "tool_call",
      "tool_result",
      "compaction",
      "text",
      "turn_complete",
    ]);
    expect(run.chunks[4]?.agentloop).toMatchObject({ ...compaction, runId: "run_1" });
  });

  it("streams thinking as reasoning_content", () => {
    const run = mapRun(
      [
        { type: "thinking", text: "hmm" },
        { type: "message_delta", text: "ok" },
      ],
      result("final_answer", "ok"),
    );
    expect(run.chunks[0]?.choices[0]?.delta).toEqual({ reasoning_content: "hmm" });
    expect(run.mapper.completion(result("final_answer", "ok"), "stop").choices[0]?.message).toMatchObject({
      content: "ok",
      reasoning_content: "hmm",
    });
  });
});

describe("finishReason", () => {
  it("follows SPEC section 6", () => {
    const table: Record<StopReason, string | undefined> = {
      final_answer: "stop",
      task_completion: "stop",
      converse: "stop",
      ask_question: "stop",
      approval_required: "stop",
      tool_calls: "tool_calls",
      max_iterations: "length",
      budget_exceeded: "length",
      aborted: "length",
      circuit_breaker: undefined,
      model_error: undefined,
    };
    for (const [stop, reason] of Object.entries(table))
      expect(finishReason(stop as StopReason), stop).toBe(reason);
  });
});

describe("toRunInput", () => {
  const run = (messages: unknown[]) => toRunInput(chatRequestSchema.parse({ messages }));

  it("joins system and developer messages as instructions and takes the last user message as input", () => {
    expect(
      run([
        { role: "system", content: "A." },
        { role: "user", content: "first" },
        { role: "assistant", content: "reply" },
        { role: "developer", content: [{ type: "text", text: "B." }] },
        {
          role: "user",
          content: [
            { type: "text", text: "second " },
            { type: "input_audio", input_audio: { data: "AAAA", format: "wav" } },
          ],
        },
      ]),
    ).toEqual({
      instructions: "A.\n\nB.",
      history: [
        { role: "user", content: "first" },
        { role: "assistant", content: "reply" },
      ],
      input: "second [input_audio omitted]",
    });
  });

  it("refuses conversations the runtime cannot run, naming the message", () => {
    expect(run([{ role: "system", content: "only" }])).toMatchObject({ param: "messages" });
    expect(
      run([
        { role: "user", content: "a" },
        { role: "tool", tool_call_id: "t9", content: "x" },
      ]),
    ).toMatchObject({
      param: "messages.1",
    });
  });
});
