import { describe, expect, it } from "vitest";
import { z } from "zod";
import { Agent, type AgentEvent, defineTool, type RunState } from "../index.js";
import { scriptedModel } from "../testing/index.js";

/** Tools that count their runs: `read` needs no approval, `write` always does. */
function tools(options: { writeNeeds?: boolean | ((args: unknown) => boolean) } = {}) {
  const ran: string[] = [];
  const read = defineTool({
    name: "read",
    description: "Reads a file.",
    parameters: z.object({ path: z.string() }),
    execute: ({ path }) => {
      ran.push(`read ${path}`);
      return `contents of ${path}`;
    },
  });
  const write = defineTool({
    name: "write",
    description: "Writes a file.",
    parameters: z.object({ path: z.string() }),
    needsApproval: options.writeNeeds ?? true,
    execute: ({ path }) => {
      ran.push(`write ${path}`);
      return `wrote ${path}`;
    },
  });
  return { ran, list: [read, write] };
}

const readAndWrite = {
  toolCalls: [
    { id: "w1", name: "write", arguments: { path: "a.txt" } },
    { id: "r1", name: "read", arguments: { path: "b.txt" } },
  ],
};

describe("approvals", () => {
  it("runs the calls that need none, then stops with approval_required; nothing waiting has run", async () => {
    const { ran, list } = tools();
    const model = scriptedModel([readAndWrite]);
    const events: AgentEvent[] = [];
    const result = await new Agent({ model, tools: list, onEvent: (e) => events.push(e) }).run("go");
    expect(result.stopReason).toBe("approval_required");
    expect(ran).toEqual(["read b.txt"]);
    const waiting = [{ id: "w1", name: "write", arguments: { path: "a.txt" } }];
    expect(result.pendingApprovals).toEqual(waiting);
    expect(events.find((e) => e.type === "approval_request")).toMatchObject(waiting[0] as object);
    expect(events.at(-1)).toEqual({
      type: "turn_complete",
      stopReason: "approval_required",
      iterations: 1,
      output: "",
      usage: result.usage,
      pendingApprovals: waiting,
      runId: result.runId,
    });
    expect(result.state.status).toBe("awaiting_approval");
  });

  it("continues from the (serialised) state once approved: results in call order, the model asked once more", async () => {
    const { ran, list } = tools();
    const model = scriptedModel([readAndWrite, { text: "Done." }]);
    const agent = new Agent({ model, tools: list });
    const paused = await agent.run("go");
    const state = JSON.parse(JSON.stringify(paused.state)) as RunState;
    const result = await agent.resume(state, { approve: ["w1"] }).result;
    expect(result).toMatchObject({ stopReason: "final_answer", output: "Done.", runId: paused.runId });
    expect(ran).toEqual(["read b.txt", "write a.txt"]);
    expect(model.requests).toHaveLength(2);
    expect(model.requests[1]?.messages.slice(-2)).toMatchObject([
      { role: "tool", toolCallId: "w1", content: "wrote a.txt", isError: false },
      { role: "tool", toolCallId: "r1", content: "contents of b.txt" },
    ]);
  });

  it("a denied call is not run: the model reads that the user declined it", async () => {
    const { ran, list } = tools();
    const model = scriptedModel([readAndWrite, { text: "Understood." }]);
    const agent = new Agent({ model, tools: list });
    const paused = await agent.run("go");
    expect(() => agent.resume(paused.state, { approve: ["nope"] })).toThrow(
      "No call 'nope' waits for approval; waiting: w1 (write).",
    );
    const result = await agent.resume(paused.state, { deny: "all" }).result;
    expect(result.stopReason).toBe("final_answer");
    expect(ran).toEqual(["read b.txt"]);
    expect(model.requests[1]?.messages.at(-2)).toMatchObject({
      role: "tool",
      toolCallId: "w1",
      isError: true,
      content: "The user declined this call: it was not run.",
    });
  });

  it("needsApproval can look at the arguments", async () => {
    const { ran, list } = tools({ writeNeeds: (args) => (args as { path: string }).path.startsWith("/etc") });
    const model = scriptedModel([
      { toolCalls: [{ name: "write", arguments: { path: "notes.txt" } }] },
      { toolCalls: [{ name: "write", arguments: { path: "/etc/passwd" } }] },
    ]);
    const result = await new Agent({ model, tools: list }).run("go");
    expect(ran).toEqual(["write notes.txt"]);
    expect(result.stopReason).toBe("approval_required");
    expect(result.pendingApprovals?.map((p) => p.arguments)).toEqual([{ path: "/etc/passwd" }]);
  });

  it("onApproval decides in process: deny, approve, and always for the rest of the run", async () => {
    const { ran, list } = tools();
    const write = (path: string) => ({ toolCalls: [{ name: "write", arguments: { path } }] });
    const model = scriptedModel([write("1"), write("2"), write("3"), write("4"), { text: "ok" }]);
    const answers = ["deny", "approve", "always"] as const;
    const asked: string[] = [];
    const agent = new Agent({
      model,
      tools: list,
      onApproval: (call) => {
        asked.push(String(call.arguments.path));
        return answers[asked.length - 1] ?? "deny";
      },
    });
    const result = await agent.run("go");
    expect(result.stopReason).toBe("final_answer");
    expect(asked).toEqual(["1", "2", "3"]);
    expect(ran).toEqual(["write 2", "write 3", "write 4"]);
  });
});

describe("checkpoints and resume", () => {
  it("gives a JSON state at every checkpoint: the input, the reply before its calls, each result, each iteration", async () => {
    const { list } = tools();
    const model = scriptedModel([
      { toolCalls: [{ id: "r1", name: "read", arguments: { path: "x" } }] },
      { text: "Read it." },
    ]);
    const seen: string[] = [];
    const checkpoint = async (state: RunState) => {
      const last = state.messages.at(-1);
      seen.push(`${state.status}:${last?.role}${state.pending ? "+pending" : ""}`);
      expect(JSON.parse(JSON.stringify(state))).toEqual(state);
    };
    await new Agent({ model, tools: list }).stream("go", { checkpoint }).result;
    expect(seen).toEqual([
      "running:user", // the input, before the model is asked
      "running:assistant+pending", // the reply, before its call starts
      "running:tool+pending", // the call's result, as it completes
      "running:tool", // the iteration's end
      "completed:assistant", // the stop
    ]);
  });

  it("resumes a run killed between two parallel calls: the completed call is not run again, the model not asked again", async () => {
    const { ran, list } = tools();
    const first = scriptedModel([
      {
        toolCalls: [
          { id: "r1", name: "read", arguments: { path: "one" } },
          { id: "r2", name: "read", arguments: { path: "two" } },
        ],
      },
    ]);
    // What a store holds when the process dies right after the first result was checkpointed.
    let crashed: RunState | undefined;
    const controller = new AbortController();
    const agent = new Agent({ model: first, tools: list, toolConcurrency: 1 });
    await agent.stream("go", {
      signal: controller.signal,
      checkpoint: async (state) => {
        if (!crashed && state.messages.at(-1)?.role === "tool") {
          crashed = JSON.parse(JSON.stringify(state)) as RunState;
          controller.abort();
        }
      },
    }).result;
    if (!crashed) throw new Error("no checkpoint after the first result");
    expect(crashed.status).toBe("running");
    expect(crashed.messages.filter((m) => m.role === "tool")).toHaveLength(1);

    ran.length = 0;
    const second = scriptedModel([{ text: "Both read." }]); // fails on any unexpected request
    const resumed = await new Agent({ model: second, tools: list }).resume(crashed).result;
    expect(resumed).toMatchObject({ stopReason: "final_answer", output: "Both read.", iterations: 2 });
    expect(ran).toEqual(["read two"]);
    expect(second.requests).toHaveLength(1);
    expect(second.requests[0]?.messages.slice(-2)).toMatchObject([
      { role: "tool", toolCallId: "r1", content: "contents of one" },
      { role: "tool", toolCallId: "r2", content: "contents of two" },
    ]);
  });

  it("an aborted run leaves a conversation that can continue: every open call gets an error result", async () => {
    const slow = defineTool({
      name: "slow",
      description: "Never ends.",
      parameters: z.object({}),
      execute: (_args, { signal }) =>
        new Promise((_resolve, reject) => signal.addEventListener("abort", reject)),
    });
    const controller = new AbortController();
    const model = scriptedModel([
      { toolCalls: [{ id: "s1", name: "slow", arguments: {} }] },
      { text: "Hello again." },
    ]);
    const agent = new Agent({ model, tools: [slow] });
    const run = agent.stream("go", { signal: controller.signal });
    for await (const event of run) if (event.type === "tool_call") controller.abort();
    const aborted = await run.result;
    expect(aborted.stopReason).toBe("aborted");
    expect(aborted.messages.at(-1)).toMatchObject({ role: "tool", toolCallId: "s1", isError: true });
    const next = await agent.run("hi", { history: aborted.messages });
    expect(next.output).toBe("Hello again.");
  });

  it("refuses a state of another version, and leaving a for-await early aborts the run", async () => {
    const agent = new Agent({ model: scriptedModel([{ text: "x" }]) });
    const state = { ...(await agent.run("go")).state, version: 99 } as unknown as RunState;
    expect(() => agent.resume(state)).toThrow(
      "This run state has version 99; this agentloop continues version 1.",
    );

    const { list } = tools();
    const reading = scriptedModel(() => ({ toolCalls: [{ name: "read", arguments: { path: "p" } }] }));
    const looping = new Agent({ model: reading, tools: list });
    const run = looping.stream("go");
    for await (const event of run) if (event.type === "tool_result") break;
    expect((await run.result).stopReason).toBe("aborted");
  });

  it("leaving a for-await while a tool that ignores its signal runs settles that call at once", async () => {
    let started = 0;
    const stuck = defineTool({
      name: "stuck",
      description: "Reports progress, then never ends.",
      parameters: z.object({}),
      execute: (_args, { onProgress }) => {
        started++;
        onProgress?.({ progress: 1, message: "working" });
        return new Promise(() => {});
      },
    });
    const model = scriptedModel(() => ({ toolCalls: [{ id: "s1", name: "stuck", arguments: {} }] }));
    // Its own signal only, and with a caller's signal too: both settle the call.
    for (const options of [{}, { signal: new AbortController().signal }]) {
      const run = new Agent({ model, tools: [stuck] }).stream("go", options);
      for await (const event of run) if (event.type === "tool_progress") break;
      const result = await run.result;
      expect(result.stopReason).toBe("aborted");
      expect(result.messages.at(-1)).toMatchObject({ role: "tool", toolCallId: "s1", isError: true });
    }
    expect(started).toBe(2);
  });
});
