import { describe, expect, it } from "vitest";
import { countRequest } from "../../test/support/count-request.js";
import { AgentloopError } from "../core/errors.js";
import type { Message } from "../core/messages.js";
import { scriptedModel } from "../testing/scripted-model.js";
import { contextManager } from "./prune.js";
import { createTokenCounter, estimateTokens, MESSAGE_OVERHEAD } from "./tokens.js";

/** One token per character: easy arithmetic in the tests. */
const chars = createTokenCounter((text) => text.length);

const task: Message = { role: "user", content: "Do the task." };
function toolTurn(i: number, resultChars = 50): Message[] {
  return [
    {
      role: "assistant",
      content: `step ${i}`,
      toolCalls: [{ id: `c${i}`, name: "calc", arguments: `{"n":${i}}` }],
    },
    { role: "tool", toolCallId: `c${i}`, name: "calc", content: "r".repeat(resultChars), isError: false },
  ];
}
function conversation(turns: number): Message[] {
  return [task, ...Array.from({ length: turns }, (_, i) => toolTurn(i)).flat()];
}

describe("contextManager budget", () => {
  it("defaults to the model's window, else 100,000, minus a reserve for the answer", () => {
    expect(contextManager({ modelId: "gpt-4o" }).budget).toBe(128_000 - 8_192);
    expect(contextManager({ modelId: "my-model" }).budget).toBe(100_000 - 8_192);
    expect(contextManager({ modelId: "x", maxContextTokens: 10_000 }).budget).toBe(8_500);
    expect(contextManager({ modelId: "x", maxContextTokens: 10_000, reserveTokens: 0 }).budget).toBe(10_000);
  });

  it("rejects a budget with no room", () => {
    expect(() => contextManager({ modelId: "x", maxContextTokens: 100, reserveTokens: 100 })).toThrow(
      AgentloopError,
    );
    expect(() => contextManager({ modelId: "x", maxContextTokens: 0 })).toThrow(/maxContextTokens/);
  });
});

describe("contextManager.fit (drop)", () => {
  const options = { modelId: "x", maxContextTokens: 1_000, reserveTokens: 0, headroom: 0, counter: chars };

  it("returns the history itself when everything fits", async () => {
    const history = conversation(3);
    expect(await contextManager(options).fit(history, "system", [])).toBe(history);
  });

  it("keeps the task, a notice and the newest whole turns, under budget", async () => {
    const history = conversation(30);
    const manager = contextManager(options);
    const sent = await manager.fit(history, "system", []);
    expect(countRequest({ system: "system", messages: sent, tools: [] }, chars)).toBeLessThanOrEqual(1_000);
    expect(sent[0]).toBe(task);
    const dropped = history.length - (sent.length - 2);
    expect(sent[1]).toEqual({
      role: "user",
      content: `[${dropped - 1} earlier messages omitted to fit the context window]`,
    });
    expect(sent[2]?.role).toBe("assistant");
    expect(sent.at(-1)).toBe(history.at(-1));
    expect(sent.slice(2)).toEqual(history.slice(dropped));
  });

  it("counts the system prompt and the tool schemas against the budget", async () => {
    const history = conversation(8);
    const manager = contextManager(options);
    expect(await manager.fit(history, "", [])).toBe(history);
    const tool = { name: "calc", description: "d".repeat(400), parameters: { type: "object" } };
    expect((await manager.fit([...history], "s".repeat(200), [tool])).length).toBeLessThan(history.length);
  });

  it("sends the task and the newest turn even when they alone are over budget", async () => {
    const history = [...conversation(3), ...toolTurn(9, 5_000)];
    const sent = await contextManager(options).fit(history, "system", []);
    expect(sent).toEqual([
      task,
      { role: "user", content: "[6 earlier messages omitted to fit the context window]" },
      ...toolTurn(9, 5_000),
    ]);
  });

  it("keeps parallel calls and all of their results together", async () => {
    const parallel: Message[] = [
      {
        role: "assistant",
        content: "",
        toolCalls: [
          { id: "p1", name: "a", arguments: "{}" },
          { id: "p2", name: "b", arguments: "{}" },
        ],
      },
      { role: "tool", toolCallId: "p1", name: "a", content: "x".repeat(300), isError: false },
      { role: "tool", toolCallId: "p2", name: "b", content: "boom", isError: true },
    ];
    const history = [task, ...parallel, { role: "assistant" as const, content: "y".repeat(500) }];
    const sent = await contextManager({ ...options, maxContextTokens: 700 }).fit(history, "", []);
    expect(sent.slice(2)).toEqual([history.at(-1)]);
  });

  it("serves many histories independently and notices a rewritten one", async () => {
    const manager = contextManager(options);
    const a = conversation(30);
    const b = conversation(2);
    expect((await manager.fit(a, "s", [])).length).toBeLessThan(a.length);
    expect(await manager.fit(b, "s", [])).toBe(b);
    a.splice(3); // e.g. a chat session reset in place
    expect(await manager.fit(a, "s", [])).toBe(a);
  });

  it("moves the cut with headroom, so the sent prefix stays identical for several calls", async () => {
    const manager = contextManager({ ...options, headroom: 0.5 });
    const history = conversation(20);
    const first = await manager.fit(history, "s", []);
    const notice = first[1];
    history.push(...toolTurn(100));
    const second = await manager.fit(history, "s", []);
    expect(second[1]).toBe(notice);
    expect(second.at(-1)).toBe(history.at(-1));
  });
});

describe("contextManager counts each message once", () => {
  it("over many calls on a growing history, and the system prompt and tools once too", async () => {
    const calls = new Map<Message, number>();
    const texts = new Map<string, number>();
    const base = createTokenCounter((text) => {
      texts.set(text, (texts.get(text) ?? 0) + 1);
      return estimateTokens(text);
    });
    const counter = {
      count: base.count,
      countMessage(message: Message) {
        calls.set(message, (calls.get(message) ?? 0) + 1);
        return base.countMessage(message);
      },
    };
    const manager = contextManager({ modelId: "x", maxContextTokens: 2_000, reserveTokens: 0, counter });
    const system = "You are a careful assistant. ".repeat(10);
    const tools = [{ name: "calc", description: "Evaluates arithmetic.", parameters: { type: "object" } }];
    const history: Message[] = [task];
    for (let i = 0; i < 300; i++) {
      history.push(...toolTurn(i));
      await manager.fit(history, system, tools);
    }
    for (const message of history) expect(calls.get(message)).toBe(1);
    expect(texts.get(system)).toBe(1);
    expect(texts.get("Evaluates arithmetic.")).toBe(1);
  });
});

describe("contextManager.truncateToolResult", () => {
  it("cuts a result beyond maxToolResultTokens (a quarter of the budget by default)", () => {
    const manager = contextManager({
      modelId: "x",
      maxContextTokens: 4_000,
      reserveTokens: 0,
      counter: chars,
    });
    expect(manager.maxToolResultTokens).toBe(1_000);
    expect(manager.truncateToolResult("short")).toBe("short");
    const cut = manager.truncateToolResult("z".repeat(5_000));
    expect(cut.length).toBeLessThanOrEqual(1_000);
    expect(cut).toContain("truncated: the full text has 5000 tokens");
  });
});

describe("contextManager.fit (summarize)", () => {
  const options = {
    modelId: "x",
    maxContextTokens: 2_000,
    reserveTokens: 0,
    strategy: "summarize" as const,
    counter: chars,
  };

  it("replaces the dropped span with one summary, computed once until the span grows", async () => {
    const summarizer = scriptedModel([{ text: "Computed steps 0-9." }, { text: "Computed steps 0-19." }]);
    const manager = contextManager({ ...options, summarizer });
    const history = conversation(25);
    const sent = await manager.fit(history, "system", []);
    const dropped = history.length - (sent.length - 2);
    expect(sent[1]).toEqual({
      role: "user",
      content: `[Summary of ${dropped - 1} earlier messages: Computed steps 0-9.]`,
    });
    expect(countRequest({ system: "system", messages: sent, tools: [] }, chars)).toBeLessThanOrEqual(2_000);
    const request = summarizer.requests[0];
    expect(request?.tools).toEqual([]);
    expect(request?.messages[0]?.content).toContain('Assistant called calc({"n":0})');
    expect(request?.messages[0]?.content).toContain("Tool calc result: rrrr");

    expect(await manager.fit(history, "system", [])).toBe(sent);
    expect(summarizer.requests).toHaveLength(1);

    // Grow until the cut moves: the next summary folds in the previous one.
    while (summarizer.requests.length === 1) {
      history.push(...toolTurn(history.length));
      await manager.fit(history, "system", []);
    }
    expect(summarizer.requests[1]?.messages[0]?.content).toMatch(/^Summary so far:\nComputed steps 0-9\./);
    const latest = await manager.fit(history, "system", []);
    expect(latest[1]?.content).toMatch(/^\[Summary of \d+ earlier messages: Computed steps 0-19\.\]$/);
  });

  it("falls back to dropping when the summarizer fails, and keeps an earlier summary", async () => {
    const summarizer = scriptedModel([
      { text: "First part." },
      { error: { code: "http_500", message: "down" } },
    ]);
    const manager = contextManager({ ...options, summarizer });
    const history = conversation(25);
    await manager.fit(history, "system", []);
    while (summarizer.requests.length === 1) {
      history.push(...toolTurn(history.length));
      await manager.fit(history, "system", []);
    }
    const sent = await manager.fit(history, "system", []);
    expect(sent[1]?.content).toMatch(
      /^\[Summary of \d+ earlier messages: First part\.\]\n\[\d+ earlier messages omitted to fit the context window\]$/,
    );
    const failing = contextManager({
      ...options,
      summarizer: scriptedModel([{ error: { code: "http_500", message: "x" } }]),
    });
    const other = conversation(25);
    expect((await failing.fit(other, "system", []))[1]?.content).toMatch(/^\[\d+ earlier messages omitted/);
  });

  it("drops when no summarizer is given, and truncates a long summary to its share", async () => {
    const history = conversation(25);
    expect((await contextManager(options).fit(history, "s", []))[1]?.content).toMatch(
      /^\[\d+ earlier messages omitted/,
    );
    const verbose = scriptedModel([{ text: "w".repeat(5_000) }]);
    const sent = await contextManager({ ...options, summarizer: verbose }).fit(history, "s", []);
    expect(sent[1]?.content).toContain("truncated");
    expect(chars.countMessage(sent[1] as Message)).toBeLessThanOrEqual(200 + 60 + MESSAGE_OVERHEAD);
    expect(countRequest({ system: "s", messages: sent, tools: [] }, chars)).toBeLessThanOrEqual(2_000);
  });
});
