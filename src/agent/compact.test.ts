import { describe, expect, it } from "vitest";
import { z } from "zod";
import { Agent, type AgentEventBody, defineTool, type Message, type RunResult } from "../index.js";
import type { ModelRequest } from "../models/adapter.js";
import { type ScriptedStep, scriptedModel } from "../testing/index.js";

const lookup = defineTool({
  name: "lookup",
  description: "Looks a key up.",
  parameters: z.object({ key: z.number() }),
  execute: ({ key }) => `value of ${key}: ${"lorem ipsum dolor sit amet ".repeat(30)}`,
});

const isSummaryRequest = (request: ModelRequest) => request.system.startsWith("You compact");

/** Calls `lookup` `calls` times, then answers; summary requests get `summary`. */
function worker(calls: number, summary: ScriptedStep = { text: "SUMMARY: keys 0.. were looked up." }) {
  let done = 0;
  return scriptedModel((request) => {
    if (isSummaryRequest(request)) return summary;
    if (done < calls) {
      done++;
      return {
        toolCalls: [{ name: "lookup", arguments: { key: done } }],
        usage: { inputTokens: 10, outputTokens: 5 },
      };
    }
    return { text: "all done", usage: { inputTokens: 10, outputTokens: 5 } };
  });
}

async function collect(
  agent: Agent,
  input: string,
): Promise<{ events: AgentEventBody[]; result: RunResult }> {
  const events: AgentEventBody[] = [];
  const run = agent.stream(input);
  for await (const { runId: _, ...event } of run) events.push(event as AgentEventBody);
  return { events, result: await run.result };
}

/** Every tool call has its result right after its reply, and every result its call. */
function expectNoOrphans(messages: readonly Message[]) {
  for (let i = 0; i < messages.length; i++) {
    const message = messages[i] as Message;
    if (message.role === "assistant") {
      const ids = (message.toolCalls ?? []).map((c) => c.id);
      const results = messages
        .slice(i + 1, i + 1 + ids.length)
        .map((m) => (m.role === "tool" ? m.toolCallId : ""));
      expect(results).toEqual(ids);
    } else if (message.role === "tool") {
      const previous = messages.slice(0, i).findLast((m) => m.role !== "tool");
      expect(
        previous?.role === "assistant" && previous.toolCalls?.some((c) => c.id === message.toolCallId),
      ).toBe(true);
    }
  }
}

describe("compaction", () => {
  it("replaces the older history by one summary when a request would pass the threshold", async () => {
    const model = worker(12);
    const agent = new Agent({
      model,
      tools: [lookup],
      maxIterations: 20,
      maxContextTokens: 4000,
      compaction: { at: 0.5 },
    });
    const { events, result } = await collect(agent, "Look up keys 1 to 12.");
    expect(result.stopReason).toBe("final_answer");
    const compactions = events.filter((e) => e.type === "compaction");
    expect(compactions.length).toBeGreaterThan(0);
    for (const event of compactions) {
      if (event.type !== "compaction") continue;
      expect(event.summarizedMessages).toBeGreaterThan(1);
      expect(event.tokensAfter).toBeLessThan(event.tokensBefore);
    }
    const summaries = result.messages.filter((m) => m.role === "user" && m.compaction);
    expect(summaries).toHaveLength(1);
    expect(summaries[0]?.content).toContain("SUMMARY: keys 0..");
    expect(result.messages[0]).toEqual({ role: "user", content: "Look up keys 1 to 12." });
    expectNoOrphans(result.messages);
    // The summary calls are not iterations, but their usage is the run's.
    const summaryCalls = model.requests.filter(isSummaryRequest).length;
    expect(summaryCalls).toBe(compactions.length);
    expect(result.iterations).toBe(13);
    // Every request after a compaction carries the summary, never the replaced messages.
    const last = model.requests.at(-1) as ModelRequest;
    expect(last.messages.some((m) => m.role === "user" && m.compaction)).toBe(true);
    expect(last.messages.length).toBeLessThan(result.messages.length + 1);
  });

  it("counts the summary's usage toward the run's", async () => {
    const model = worker(12, { text: "SUMMARY", usage: { inputTokens: 1000, outputTokens: 50 } });
    const agent = new Agent({
      model,
      tools: [lookup],
      maxIterations: 20,
      maxContextTokens: 4000,
      compaction: { at: 0.5 },
    });
    const { events, result } = await collect(agent, "Look up keys.");
    const n = events.filter((e) => e.type === "compaction").length;
    expect(n).toBeGreaterThan(0);
    expect(result.usage).toEqual({ inputTokens: 13 * 10 + n * 1000, outputTokens: 13 * 5 + n * 50 });
    const complete = events.at(-1);
    expect(complete?.type === "turn_complete" && complete.usage).toEqual(result.usage);
  });

  it("warns and prunes when the summary cannot be written, and goes on", async () => {
    const model = worker(12, {
      error: { code: "http_404", message: "Model API error (HTTP 404): no such model" },
    });
    const agent = new Agent({
      model,
      tools: [lookup],
      maxIterations: 20,
      maxContextTokens: 4000,
      compaction: { at: 0.5 },
    });
    const { events, result } = await collect(agent, "Look up keys.");
    expect(result.stopReason).toBe("final_answer");
    const errors = events.filter((e) => e.type === "error");
    expect(errors).toEqual([
      {
        type: "error",
        code: "compaction_failed",
        message:
          "Compaction failed (Model API error (HTTP 404): no such model): older turns are pruned instead.",
      },
    ]);
    expect(model.requests.filter(isSummaryRequest)).toHaveLength(1); // not tried again in the run
    expect(result.messages.some((m) => m.role === "user" && m.compaction)).toBe(false);
    expect(result.messages).toHaveLength(2 + 12 * 2);
  });

  it("treats an empty summary as a failure", async () => {
    const model = worker(12, { text: "  " });
    const agent = new Agent({
      model,
      tools: [lookup],
      maxIterations: 20,
      maxContextTokens: 4000,
      compaction: { at: 0.5 },
    });
    const { events } = await collect(agent, "Look up keys.");
    expect(events.find((e) => e.type === "error")).toMatchObject({ code: "compaction_failed" });
  });

  it("compacts and retries once when the provider says the prompt is too long", async () => {
    let failed = false;
    const model = scriptedModel((request, i) => {
      if (isSummaryRequest(request)) return { text: "SUMMARY of the lookups" };
      if (i < 3) return { toolCalls: [{ name: "lookup", arguments: { key: i } }] };
      if (!failed) {
        failed = true;
        return {
          error: {
            code: "context_length_exceeded",
            message: "The prompt exceeds the model's context window (HTTP 400): too long",
            status: 400,
          },
        };
      }
      return { text: "done" };
    });
    const agent = new Agent({ model, tools: [lookup], compaction: {} });
    const { events, result } = await collect(agent, "Look up.");
    expect(result.stopReason).toBe("final_answer");
    expect(result.iterations).toBe(4);
    const compaction = events.find((e) => e.type === "compaction");
    // Everything but the newest turn (the last call and its result) and the latest user message.
    expect(compaction).toMatchObject({ type: "compaction", summarizedMessages: 4 });
    const retried = model.requests.at(-1) as ModelRequest;
    expect(retried.messages.map((m) => m.role)).toEqual(["user", "user", "assistant", "tool"]);
    expectNoOrphans(result.messages);
  });

  it("stops with a model_error naming --compact on an overflow when compaction is off", async () => {
    const model = scriptedModel([
      {
        error: {
          code: "context_length_exceeded",
          message: "The prompt exceeds the model's context window (HTTP 400): too long",
          status: 400,
        },
      },
    ]);
    const result = await new Agent({ model }).run("hi");
    expect(result.stopReason).toBe("model_error");
    expect(result.error?.code).toBe("context_length_exceeded");
    expect(result.error?.message).toContain("--compact");
    expect(result.error?.message).not.toContain("\n");
  });

  it("compacts on demand: everything before the latest exchange", async () => {
    const model = scriptedModel([{ text: "SUMMARY of the first question" }]);
    const agent = new Agent({ model });
    const history: Message[] = [
      { role: "user", content: "first" },
      { role: "assistant", content: "one" },
      { role: "user", content: "second" },
      { role: "assistant", content: "two" },
    ];
    const done = await agent.compact(history);
    expect(done).toMatchObject({ status: "compacted", summarizedMessages: 2 });
    if (done.status !== "compacted") return;
    expect(done.messages.map((m) => m.content)).toEqual([
      "[Summary of the 2 earlier messages of this conversation, which were compacted]\nSUMMARY of the first question",
      "second",
      "two",
    ]);
    expect(done.messages[0]).toMatchObject({ compaction: { replaced: 2, kept: 2 } });
    expect(await agent.compact(done.messages.slice(1))).toMatchObject({ status: "nothing_to_compact" });
  });

  it("refuses an `at` outside (0, 1] and a context function", () => {
    const model = scriptedModel([]);
    for (const at of [0, -1, 1.5, Number.NaN])
      expect(() => new Agent({ model, compaction: { at } })).toThrow(
        /compaction\.at must be a number in \(0, 1\]/,
      );
    expect(() => new Agent({ model, compaction: {}, context: (h) => h })).toThrow(
      /compaction needs the built-in pruning/,
    );
  });
});
