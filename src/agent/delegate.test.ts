// Sub-agents (SPEC section 10) through the public API: delegate_task, asTool, one stream, one
// budget, one approval path and a tree that resumes from its state.
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { Agent, type AgentEvent, defineTool, type RunState } from "../index.js";
import { scriptedModel } from "../testing/index.js";

const delegate = (id: string, agent: string, task: string) => ({
  id,
  name: "delegate_task",
  arguments: { agent, task },
});

async function collect(handle: ReturnType<Agent["stream"]>) {
  const events: AgentEvent[] = [];
  for await (const event of handle) events.push(event);
  return { events, result: await handle.result };
}

describe("delegate_task", () => {
  it("runs the child on a fresh history; its answer is the call's result; its events are inline and tagged", async () => {
    const childModel = scriptedModel([{ text: "Paris.", usage: { inputTokens: 5, outputTokens: 2 } }], {
      id: "cheap",
    });
    const researcher = new Agent({
      model: childModel,
      instructions: "You research.",
      description: "Finds facts.",
    });
    const parentModel = scriptedModel([
      {
        toolCalls: [delegate("d1", "researcher", "Capital of France?")],
        usage: { inputTokens: 10, outputTokens: 3 },
      },
      { text: "It is Paris.", usage: { inputTokens: 20, outputTokens: 4 } },
    ]);
    const agent = new Agent({ model: parentModel, agents: { researcher } });
    const tool = agent.tools.find((t) => t.name === "delegate_task");
    expect(tool?.parameters).toMatchObject({
      properties: { agent: { enum: ["researcher"] }, task: { type: "string" } },
    });
    expect(tool?.description).toContain("- researcher: Finds facts.");

    const { events, result } = await collect(agent.stream("Where is the Louvre's city the capital of?"));
    expect(result.text).toBe("It is Paris.");
    // The child saw its instructions and the task only.
    expect(childModel.requests[0]?.system).toContain("You research.");
    expect(childModel.requests[0]?.messages).toEqual([{ role: "user", content: "Capital of France?" }]);
    const callResult = result.messages.find((m) => m.role === "tool");
    expect(callResult).toMatchObject({ toolCallId: "d1", content: "Paris.", isError: false });

    const child = events.filter((e) => e.parentRunId !== undefined);
    expect(child.map((e) => e.type)).toContain("turn_complete");
    for (const e of child)
      expect(e).toMatchObject({
        parentRunId: result.runId,
        parentCallId: "d1",
        agent: "researcher",
        depth: 1,
      });
    expect(child[0]?.runId).not.toBe(result.runId);
    // In order: the child's events between the call and its result; the top-level turn_complete last.
    const types = events.map((e) => `${e.parentRunId ? "child:" : ""}${e.type}`);
    const callAt = types.indexOf("tool_call");
    const resultAt = types.indexOf("tool_result");
    expect(types.indexOf("child:iteration_start")).toBeGreaterThan(callAt);
    expect(types.indexOf("child:turn_complete")).toBeLessThan(resultAt);
    expect(events.at(-1)).toMatchObject({ type: "turn_complete", runId: result.runId });
    expect(events.filter((e) => e.type === "turn_complete" && e.parentRunId === undefined)).toHaveLength(1);
    // The usage of the top-level run includes its child's.
    expect(result.usage).toMatchObject({ inputTokens: 35, outputTokens: 9 });
  });

  it("returns a child's validated JSON, its question, and an error naming a failed child's stop", async () => {
    const typed = new Agent({
      model: scriptedModel([{ text: '{"city":"Paris"}' }]),
      outputSchema: z.object({ city: z.string() }),
    });
    const asking = new Agent({
      model: scriptedModel([
        { text: "", toolCalls: [{ id: "q", name: "ask_question", arguments: { question: "Which year?" } }] },
      ]),
      mode: "explicit",
    });
    const failing = new Agent({
      model: scriptedModel([{ error: { code: "http_500", message: "upstream down" } }]),
    });
    const parent = new Agent({
      model: scriptedModel([
        {
          toolCalls: [
            delegate("a", "typed", "city"),
            delegate("b", "asking", "when"),
            delegate("c", "failing", "anything"),
            delegate("d", "nobody", "anything"),
          ],
        },
        { text: "done" },
      ]),
      agents: { typed, asking, failing },
    });
    const result = await parent.run("go");
    const results = result.messages.filter((m) => m.role === "tool");
    expect(results.map((m) => (m.role === "tool" ? [m.toolCallId, m.isError] : []))).toEqual([
      ["a", false],
      ["b", false],
      ["c", true],
      ["d", true],
    ]);
    expect(results[0]?.content).toBe('{"city":"Paris"}');
    expect(results[1]?.content).toBe("Sub-agent 'asking' asks: Which year?");
    expect(results[2]?.content).toMatch(/Sub-agent 'failing' stopped with model_error \(upstream down\)/);
    expect(results[3]?.content).toMatch(/no sub-agent 'nobody'.*typed, asking, failing/);
  });

  it("refuses a delegation past maxDepth with an error result the model reads", async () => {
    const leaf = new Agent({ model: scriptedModel([]) });
    const middle = new Agent({
      model: scriptedModel([{ toolCalls: [delegate("m1", "leaf", "deeper")] }, { text: "could not" }]),
      agents: { leaf },
    });
    const top = new Agent({
      model: scriptedModel([{ toolCalls: [delegate("t1", "middle", "go")] }, { text: "ok" }]),
      agents: { middle },
      maxDepth: 1,
    });
    const result = await top.run("go");
    const child = result.state.children?.[0]?.state;
    const refused = child?.messages.find((m) => m.role === "tool");
    expect(refused).toMatchObject({ isError: true });
    expect(refused?.content).toMatch(/nest at most 1 deep \(maxDepth\)/);
    expect(result.text).toBe("ok");
  });

  it("asTool runs an agent as a sub-agent of the calling run", async () => {
    const writer = new Agent({ model: scriptedModel([{ text: "A poem." }]) });
    const model = scriptedModel([
      { toolCalls: [{ id: "w", name: "writer", arguments: { task: "Write." } }] },
      { text: "Here it is." },
    ]);
    const agent = new Agent({ model, tools: [writer.asTool({ name: "writer", description: "Writes." })] });
    const { events, result } = await collect(agent.stream("poem"));
    expect(result.messages.find((m) => m.role === "tool")?.content).toBe("A poem.");
    expect(events.some((e) => e.agent === "writer" && e.type === "turn_complete")).toBe(true);
  });

  it("runs parallel delegations concurrently, results in call order", async () => {
    let open = 0;
    let most = 0;
    const slow = defineTool({
      name: "slow",
      description: "Waits.",
      parameters: z.object({ ms: z.number() }),
      execute: async ({ ms }) => {
        open++;
        most = Math.max(most, open);
        await new Promise((r) => setTimeout(r, ms));
        open--;
        return `waited ${ms}`;
      },
    });
    const worker = (ms: number, answer: string) =>
      new Agent({
        model: scriptedModel([
          { toolCalls: [{ id: "s", name: "slow", arguments: { ms } }] },
          { text: answer },
        ]),
        tools: [slow],
      });
    const parent = new Agent({
      model: scriptedModel([
        { toolCalls: [delegate("x", "first", "a"), delegate("y", "second", "b")] },
        { text: "both" },
      ]),
      agents: { first: worker(40, "one"), second: worker(5, "two") },
    });
    const result = await parent.run("go");
    expect(most).toBe(2);
    const results = result.messages.filter((m) => m.role === "tool").map((m) => m.content);
    expect(results).toEqual(["one", "two"]);
  });
});

describe("a tree's limits", () => {
  it("counts a child's usage against the top-level token budget: the child and the top-level run stop budget_exceeded", async () => {
    const child = new Agent({
      model: scriptedModel(
        [
          {
            toolCalls: [{ id: "c1", name: "calculator_free", arguments: {} }],
            usage: { inputTokens: 60, outputTokens: 0 },
          },
          { text: "never asked" },
        ],
        { allowUnused: true },
      ),
    });
    const parent = new Agent({
      model: scriptedModel(
        [
          { toolCalls: [delegate("d", "child", "spend")], usage: { inputTokens: 50, outputTokens: 0 } },
          { text: "never asked either" },
        ],
        { allowUnused: true },
      ),
      agents: { child },
      budget: { maxTokens: 100 },
    });
    const { events, result } = await collect(parent.stream("go"));
    const childEnd = events.find((e) => e.type === "turn_complete" && e.parentRunId !== undefined);
    expect(childEnd).toMatchObject({ stopReason: "budget_exceeded" });
    expect(result.stopReason).toBe("budget_exceeded");
    // No model call started once the budget was spent: 50 + 60, one call over at most.
    expect(result.usage.inputTokens).toBe(110);
  });

  it("aborts every child at once with the top-level signal", async () => {
    const controller = new AbortController();
    const hang = defineTool({
      name: "hang",
      description: "Never ends by itself.",
      parameters: z.object({}),
      execute: (_args, { signal }) =>
        new Promise((_resolve, reject) => {
          controller.abort();
          signal.addEventListener("abort", () => reject(new Error("stopped")));
        }),
    });
    const child = new Agent({
      model: scriptedModel([{ toolCalls: [{ id: "h", name: "hang", arguments: {} }] }]),
      tools: [hang],
    });
    const parent = new Agent({
      model: scriptedModel([{ toolCalls: [delegate("d", "child", "wait")] }]),
      agents: { child },
    });
    const result = await parent.run("go", { signal: controller.signal });
    expect(result.stopReason).toBe("aborted");
  });
});

describe("a tree's time limit and nesting", () => {
  it("stops a child with the top-level run's time limit (aborted), and the run with it", async () => {
    const hang = defineTool({
      name: "hang",
      description: "Ends only when aborted.",
      parameters: z.object({}),
      execute: (_args, { signal }) =>
        new Promise((_resolve, reject) =>
          signal.addEventListener("abort", () => reject(new Error("stopped"))),
        ),
    });
    const child = new Agent({
      model: scriptedModel([{ toolCalls: [{ id: "h", name: "hang", arguments: {} }] }]),
      tools: [hang],
    });
    const parent = new Agent({
      model: scriptedModel([{ toolCalls: [delegate("d", "child", "wait")] }]),
      agents: { child },
      budget: { timeoutMs: 20 },
    });
    const { events, result } = await collect(parent.stream("go"));
    expect(result.stopReason).toBe("aborted");
    expect(events.find((e) => e.type === "turn_complete" && e.agent === "child")).toMatchObject({
      stopReason: "aborted",
    });
  });

  it("tags a grandchild's events with its own parent and depth 2", async () => {
    const leaf = new Agent({ model: scriptedModel([{ text: "leaf answer" }]) });
    const middle = new Agent({
      model: scriptedModel([{ toolCalls: [delegate("m1", "leaf", "deeper")] }, { text: "middle answer" }]),
      agents: { leaf },
    });
    const top = new Agent({
      model: scriptedModel([{ toolCalls: [delegate("t1", "middle", "go")] }, { text: "top answer" }]),
      agents: { middle },
    });
    const { events, result } = await collect(top.stream("go"));
    expect(result.text).toBe("top answer");
    const ends = events.filter((e) => e.type === "turn_complete");
    const middleRun = ends.find((e) => e.agent === "middle");
    expect(ends.map((e) => [e.agent ?? "top", e.depth ?? 0, e.parentCallId ?? "-"])).toEqual([
      ["leaf", 2, "m1"],
      ["middle", 1, "t1"],
      ["top", 0, "-"],
    ]);
    expect(ends[0]?.parentRunId).toBe(middleRun?.runId);
    // The stored tree: the leaf's run inside the middle's, inside the top-level state.
    expect(result.state.children?.[0]?.state.children?.[0]).toMatchObject({
      agent: "leaf",
      depth: 2,
      parentCallId: "m1",
    });
  });
});

describe("approvals through a child", () => {
  const remove = defineTool({
    name: "remove",
    description: "Removes a file.",
    parameters: z.object({ path: z.string() }),
    needsApproval: true,
    execute: ({ path }) => `removed ${path}`,
  });

  it("asks the top-level onApproval, naming the agent and the child run", async () => {
    const asked: unknown[] = [];
    const cleaner = new Agent({
      model: scriptedModel([
        { toolCalls: [{ id: "r", name: "remove", arguments: { path: "a.txt" } }] },
        { text: "removed" },
      ]),
      tools: [remove],
    });
    const parent = new Agent({
      model: scriptedModel([{ toolCalls: [delegate("d", "cleaner", "clean")] }, { text: "clean" }]),
      agents: { cleaner },
      onApproval: (call) => {
        asked.push(call);
        return "approve";
      },
    });
    const result = await parent.run("go");
    expect(result.text).toBe("clean");
    expect(asked).toEqual([
      {
        id: "r",
        name: "remove",
        arguments: { path: "a.txt" },
        agent: "cleaner",
        runId: result.state.children?.[0]?.state.runId,
      },
    ]);
  });

  it("a tool allowed for good in a child is not asked about again in the children started later", async () => {
    const asked: string[] = [];
    const cleaner = () =>
      new Agent({
        model: scriptedModel((request) =>
          request.messages.at(-1)?.role === "tool"
            ? { text: "ok" }
            : {
                toolCalls: [
                  { id: "r", name: "remove", arguments: { path: String(request.messages[0]?.content) } },
                ],
              },
        ),
        tools: [remove],
      });
    const parent = new Agent({
      model: scriptedModel([
        { toolCalls: [delegate("d1", "cleaner", "a.txt")] },
        { toolCalls: [delegate("d2", "cleaner", "b.txt")] },
        { text: "clean" },
      ]),
      agents: { cleaner: cleaner() },
      onApproval: (call) => {
        asked.push(String(call.arguments.path));
        return "always";
      },
    });
    const result = await parent.run("go");
    expect(result.text).toBe("clean");
    expect(asked).toEqual(["a.txt"]);
    expect(result.state.allowedTools).toEqual(["remove"]);
    const removed = result.state.children?.map(
      (c) => c.state.messages.find((m) => m.role === "tool")?.content,
    );
    expect(removed).toEqual(["removed a.txt", "removed b.txt"]);
  });

  it("asks about parallel children's calls one at a time", async () => {
    let open = 0;
    let most = 0;
    const cleaner = (path: string) =>
      new Agent({
        model: scriptedModel([
          { toolCalls: [{ id: `r-${path}`, name: "remove", arguments: { path } }] },
          { text: "ok" },
        ]),
        tools: [remove],
      });
    const parent = new Agent({
      model: scriptedModel([
        { toolCalls: [delegate("d1", "one", "clean"), delegate("d2", "two", "clean")] },
        { text: "clean" },
      ]),
      agents: { one: cleaner("a.txt"), two: cleaner("b.txt") },
      onApproval: async () => {
        open++;
        most = Math.max(most, open);
        await new Promise((r) => setTimeout(r, 5));
        open--;
        return "approve" as const;
      },
    });
    const result = await parent.run("go");
    expect(result.text).toBe("clean");
    expect(most).toBe(1);
  });

  it("without onApproval the top-level run waits with the child's calls; resume continues the child, then its parent", async () => {
    const cleaner = new Agent({
      model: scriptedModel([
        {
          toolCalls: [
            { id: "r1", name: "remove", arguments: { path: "a.txt" } },
            { id: "r2", name: "remove", arguments: { path: "b.txt" } },
          ],
        },
        { text: "removed a, not b" },
      ]),
      tools: [remove],
    });
    const parentModel = scriptedModel([
      { toolCalls: [delegate("d", "cleaner", "clean")] },
      { text: "all done" },
    ]);
    const parent = new Agent({ model: parentModel, agents: { cleaner } });
    const waiting = await parent.run("go");
    expect(waiting.stopReason).toBe("approval_required");
    const childRunId = waiting.state.children?.[0]?.state.runId;
    expect(waiting.pendingApprovals).toEqual([
      { id: "r1", name: "remove", arguments: { path: "a.txt" }, agent: "cleaner", runId: childRunId },
      { id: "r2", name: "remove", arguments: { path: "b.txt" }, agent: "cleaner", runId: childRunId },
    ]);
    // The state is plain JSON: what a store keeps.
    const stored = JSON.parse(JSON.stringify(waiting.state)) as RunState;
    const { events, result } = await collect(parent.resume(stored, { approve: ["r1"], deny: ["r2"] }));
    expect(result.text).toBe("all done");
    const child = result.state.children?.[0]?.state;
    expect(child?.runId).toBe(childRunId);
    expect(child?.messages.filter((m) => m.role === "tool").map((m) => m.content)).toEqual([
      "removed a.txt",
      "The user declined this call: it was not run.",
    ]);
    expect(events.filter((e) => e.type === "turn_complete").map((e) => e.parentRunId ?? "top")).toEqual([
      waiting.runId,
      "top",
    ]);
    // The parent's model was not asked again for the reply it had given.
    expect(parentModel.requests).toHaveLength(2);
  });
});
