// The loop's specification: what one iteration does, in which order, and every way a run stops.
// Each case is a scripted model (every step used) driving a real Agent through its public API.
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { Agent, type AgentEvent, type AgentOptions, defineTool, type RunState } from "../index.js";
import { type ScriptedStep, scriptedModel } from "../testing/index.js";

const add = defineTool({
  name: "add",
  description: "Adds two numbers.",
  parameters: z.object({ a: z.number(), b: z.number() }),
  execute: ({ a, b }) => a + b,
});
/** Finishes after `ms`, to make calls complete out of call order. */
const wait = defineTool({
  name: "wait",
  description: "Waits, then answers.",
  parameters: z.object({ ms: z.number() }),
  execute: ({ ms }) => new Promise<string>((resolve) => setTimeout(() => resolve(`waited ${ms}`), ms)),
});
const remove = defineTool({
  name: "remove",
  description: "Removes a file.",
  parameters: z.object({ path: z.string() }),
  needsApproval: true,
  execute: ({ path }) => `removed ${path}`,
});

/** The run's events in order, as `type` or `type:detail`, and its result. */
async function trace(agent: Agent, input: string, options: Parameters<Agent["stream"]>[1] = {}) {
  const handle = agent.stream(input, options);
  const events: AgentEvent[] = [];
  for await (const event of handle) events.push(event);
  const result = await handle.result;
  const names = events
    .filter((e) => e.type !== "message_delta")
    .map((e) =>
      "name" in e ? `${e.type}:${e.name}` : e.type === "turn_complete" ? `${e.type}:${e.stopReason}` : e.type,
    );
  return { events, names, result };
}

describe("one iteration", () => {
  it("asks the model, streams its text, and ends on a reply without tool calls (final_answer)", async () => {
    const model = scriptedModel([{ text: "Four, as 2 + 2 makes." }]);
    const { events, names, result } = await trace(new Agent({ model }), "2+2?");
    expect(names).toEqual(["iteration_start", "message", "turn_complete:final_answer"]);
    expect(
      events
        .filter((e) => e.type === "message_delta")
        .map((e) => e.text)
        .join(""),
    ).toBe("Four, as 2 + 2 makes.");
    expect(result).toMatchObject({
      stopReason: "final_answer",
      text: "Four, as 2 + 2 makes.",
      iterations: 1,
    });
  });

  it("runs a reply's calls (events in completion order, results in call order), then asks again", async () => {
    const model = scriptedModel([
      {
        toolCalls: [
          { id: "slow", name: "wait", arguments: { ms: 30 } },
          { id: "fast", name: "add", arguments: { a: 1, b: 2 } },
        ],
      },
      { text: "Done." },
    ]);
    const { events, names, result } = await trace(new Agent({ model, tools: [wait, add] }), "go");
    expect(names).toEqual([
      "iteration_start",
      "message",
      "tool_call:wait",
      "tool_call:add",
      "tool_result:add",
      "tool_result:wait",
      "iteration_start",
      "message",
      "turn_complete:final_answer",
    ]);
    expect(events.filter((e) => e.type === "tool_result").map((e) => e.id)).toEqual(["fast", "slow"]);
    // The model's next request has the results in call order.
    const sent = model.requests[1]?.messages.slice(-2);
    expect(sent?.map((m) => (m.role === "tool" ? [m.toolCallId, m.content] : m.role))).toEqual([
      ["slow", "waited 30"],
      ["fast", "3"],
    ]);
    expect(result.steps.map((s) => s.toolCalls)).toEqual([2, 0]);
  });
});

describe("approvals", () => {
  it("announces a call that needs approval before onApproval decides; a declined call gets an error result", async () => {
    const model = scriptedModel([
      {
        toolCalls: [
          { id: "r", name: "remove", arguments: { path: "a.txt" } },
          { id: "x", name: "add", arguments: { a: 1, b: 1 } },
        ],
      },
      { text: "Not removed." },
    ]);
    const asked: string[] = [];
    const seen: string[] = [];
    const agent = new Agent({
      model,
      tools: [remove, add],
      onApproval: (call) => {
        asked.push(`${call.id} after ${seen.at(-1)}`);
        return "deny";
      },
      onEvent: (event) => seen.push(event.type),
    });
    const { names, result } = await trace(agent, "clean up");
    expect(asked).toEqual(["r after approval_request"]);
    expect(names.slice(0, 7)).toEqual([
      "iteration_start",
      "message",
      "tool_call:remove",
      "tool_call:add",
      "approval_request:remove",
      "tool_result:remove",
      "tool_result:add",
    ]);
    expect(result.messages[2]).toMatchObject({
      toolCallId: "r",
      isError: true,
      content: "The user declined this call: it was not run.",
    });
    expect(result.stopReason).toBe("final_answer");
  });

  it("without onApproval the run waits (approval_required) and resumes with the decision", async () => {
    const model = scriptedModel([
      { toolCalls: [{ id: "r", name: "remove", arguments: { path: "a.txt" } }] },
      { text: "Removed." },
    ]);
    const agent = new Agent({ model, tools: [remove] });
    const first = await trace(agent, "clean up");
    expect(first.names.at(-1)).toBe("turn_complete:approval_required");
    expect(first.result.pendingApprovals).toEqual([
      { id: "r", name: "remove", arguments: { path: "a.txt" } },
    ]);
    expect(first.result.state.status).toBe("awaiting_approval");
    const state = JSON.parse(JSON.stringify(first.result.state)) as RunState;
    const second = await agent.resume(state, { approve: ["r"] }).result;
    expect(second).toMatchObject({ stopReason: "final_answer", text: "Removed." });
    expect(second.messages.find((m) => m.role === "tool")).toMatchObject({ content: "removed a.txt" });
  });
});

describe("every stop reason", () => {
  const stops: [string, ScriptedStep[], Omit<AgentOptions, "model">][] = [
    [
      "task_completion",
      [{ toolCalls: [{ name: "task_completion", arguments: { result: "ok" } }] }],
      { mode: "explicit" },
    ],
    ["converse", [{ toolCalls: [{ name: "converse", arguments: { message: "hi" } }] }], { mode: "explicit" }],
    [
      "max_iterations",
      [{ toolCalls: [{ name: "add", arguments: { a: 1, b: 1 } }] }],
      { maxIterations: 1, tools: [add] },
    ],
    ["model_error", [{ error: { code: "http_500", message: "boom" } }], {}],
    ["circuit_breaker", [{ text: "a" }, { text: "b" }], { mode: "explicit", circuitBreakerThreshold: 2 }],
  ];
  for (const [reason, steps, options] of stops) {
    it(`stops with ${reason}`, async () => {
      const model = scriptedModel(steps);
      const { names, result } = await trace(new Agent({ model, ...options }), "go");
      expect(names.at(-1)).toBe(`turn_complete:${reason}`);
      expect(result.stopReason).toBe(reason);
      expect(result.state.status).toBe("completed");
    });
  }

  it("stops with budget_exceeded before a model call once the token budget is spent", async () => {
    const model = scriptedModel([
      {
        toolCalls: [{ name: "add", arguments: { a: 1, b: 1 } }],
        usage: { inputTokens: 90, outputTokens: 20 },
      },
    ]);
    const { result } = await trace(new Agent({ model, tools: [add] }), "go", { budget: { maxTokens: 100 } });
    expect(result).toMatchObject({ stopReason: "budget_exceeded", iterations: 1 });
  });

  it("waits with ask_question and goes on with the answer", async () => {
    const model = scriptedModel([
      { toolCalls: [{ id: "q", name: "ask_question", arguments: { question: "Which file?" } }] },
      { toolCalls: [{ name: "task_completion", arguments: { result: "a.txt it is" } }] },
    ]);
    const agent = new Agent({ model, mode: "explicit" });
    const first = await trace(agent, "clean up");
    expect(first.result).toMatchObject({ stopReason: "ask_question", text: "Which file?" });
    expect(first.result.state.status).toBe("awaiting_answer");
    const second = await agent.resume(first.result.state, { answer: "a.txt" }).result;
    expect(second).toMatchObject({ stopReason: "task_completion", output: "a.txt it is" });
    expect(model.requests[1]?.messages.at(-1)).toMatchObject({ toolCallId: "q", content: "a.txt" });
  });

  it("stops with aborted when the signal fires, every open call closed with an error result", async () => {
    const controller = new AbortController();
    const hang = defineTool({
      name: "hang",
      description: "Never answers.",
      parameters: z.object({}),
      execute: () => {
        controller.abort();
        return new Promise<string>(() => {});
      },
    });
    const model = scriptedModel([{ toolCalls: [{ id: "h", name: "hang" }] }]);
    const { names, result } = await trace(new Agent({ model, tools: [hang] }), "go", {
      signal: controller.signal,
    });
    expect(names.at(-1)).toBe("turn_complete:aborted");
    expect(result.messages.at(-1)).toMatchObject({ role: "tool", toolCallId: "h", isError: true });
    expect(result.state.pending).toBeUndefined();
  });
});
