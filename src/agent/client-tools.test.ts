// Client tools (SPEC section 14) in the library: tools the caller runs itself pause the run with
// `tool_calls`, after the reply's other calls ran; `resume` with their results continues it.
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { Agent, AgentloopError, defineTool } from "../index.js";
import { scriptedModel } from "../testing/index.js";

const weather = {
  name: "get_weather",
  description: "The weather of a city.",
  parameters: { type: "object" },
};

describe("client tools", () => {
  it("pause the run after the agent's own calls of the reply, and go on with the results", async () => {
    let runs = 0;
    const note = defineTool({
      name: "note",
      description: "Takes a note.",
      parameters: z.object({ text: z.string() }),
      execute: ({ text }) => {
        runs++;
        return `noted ${text}`;
      },
    });
    const model = scriptedModel([
      {
        toolCalls: [
          { id: "a", name: "note", arguments: { text: "x" } },
          { id: "b", name: "get_weather", arguments: { city: "Paris" } },
        ],
      },
      { text: "It is sunny in Paris." },
    ]);
    const agent = new Agent({ model, tools: [note] });
    const paused = await agent.run("Weather in Paris?", { clientTools: [weather] });
    expect(paused.stopReason).toBe("tool_calls");
    expect(paused.state.status).toBe("awaiting_tools");
    expect(runs).toBe(1);
    // The model was offered both tools, the agent's first.
    expect(model.requests[0]?.tools.map((t) => t.name)).toEqual(["note", "get_weather"]);

    const done = await agent.resume(paused.state, { toolResults: [{ id: "b", content: "sunny" }] }).result;
    expect(done.stopReason).toBe("final_answer");
    expect(done.text).toBe("It is sunny in Paris.");
    expect(runs).toBe(1);
    const sent = model.requests[1]?.messages ?? [];
    expect(
      sent.filter((m) => m.role === "tool").map((m) => [m.role === "tool" && m.toolCallId, m.content]),
    ).toEqual([
      ["a", "noted x"],
      ["b", "sunny"],
    ]);
    // Still offered after the pause: the state keeps them.
    expect(model.requests[1]?.tools.map((t) => t.name)).toEqual(["note", "get_weather"]);
  });

  it("send the tool choice on the first model call only", async () => {
    const model = scriptedModel([
      { toolCalls: [{ id: "c", name: "get_weather", arguments: {} }] },
      { text: "done" },
    ]);
    const agent = new Agent({ model });
    const paused = await agent.run("go", {
      clientTools: [weather],
      toolChoice: { name: "get_weather" },
      parallelToolCalls: false,
    });
    expect(model.requests[0]).toMatchObject({
      toolChoice: { name: "get_weather" },
      parallelToolCalls: false,
    });
    await agent.resume(paused.state, { toolResults: [{ id: "c", content: "rain" }] }).result;
    expect(model.requests[1]?.toolChoice).toBeUndefined();
  });

  it("leave requests as they were without client tools", async () => {
    const model = scriptedModel([{ text: "hi" }]);
    await new Agent({ model }).run("hello");
    expect(Object.keys(model.requests[0] ?? {}).sort()).toEqual(["messages", "system", "tools"]);
  });

  it("refuse results that do not match the waiting calls, naming them", async () => {
    const model = scriptedModel([{ toolCalls: [{ id: "c", name: "get_weather", arguments: {} }] }]);
    const agent = new Agent({ model });
    const paused = await agent.run("go", { clientTools: [weather] });
    expect(() => agent.resume(paused.state, { toolResults: [{ id: "zz", content: "?" }] })).toThrow(
      /No call 'zz' waits for a result; waiting: c \(get_weather\)/,
    );
    expect(() => agent.resume(paused.state, { toolResults: [] })).toThrow(/No result for the calls c/);
  });

  it("wait for approvals first, then for the client's results", async () => {
    const remove = defineTool({
      name: "remove",
      description: "Removes a file.",
      parameters: z.object({ path: z.string() }),
      needsApproval: true,
      execute: ({ path }) => `removed ${path}`,
    });
    const model = scriptedModel([
      {
        toolCalls: [
          { id: "r", name: "remove", arguments: { path: "a.txt" } },
          { id: "w", name: "get_weather", arguments: {} },
        ],
      },
      { text: "Removed, and sunny." },
    ]);
    const agent = new Agent({ model, tools: [remove] });
    const waiting = await agent.run("go", { clientTools: [weather] });
    expect(waiting.stopReason).toBe("approval_required");
    expect(waiting.pendingApprovals?.map((c) => c.id)).toEqual(["r"]);
    const paused = await agent.resume(waiting.state, { approve: "all" }).result;
    expect(paused.stopReason).toBe("tool_calls");
    expect(paused.messages.filter((m) => m.role === "tool").map((m) => m.content)).toEqual(["removed a.txt"]);
    const done = await agent.resume(paused.state, { toolResults: [{ id: "w", content: "sunny" }] }).result;
    expect(done.text).toBe("Removed, and sunny.");
  });

  it("refuse a client tool named like one of the agent's", () => {
    const own = defineTool({
      name: "get_weather",
      description: "",
      parameters: z.object({}),
      execute: () => "",
    });
    const agent = new Agent({ model: scriptedModel([]), tools: [own] });
    expect(() => agent.stream("go", { clientTools: [weather] })).toThrow(AgentloopError);
  });
});
