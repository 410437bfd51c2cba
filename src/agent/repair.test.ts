import { describe, expect, it } from "vitest";
import type { Message, ToolCall } from "../core/messages.js";
import { repairedHistory, uniqueIds } from "./repair.js";
import { inCallOrder } from "./state.js";

const call = (id: string, name = "t", args = "{}"): ToolCall => ({ id, name, arguments: args });

describe("uniqueIds", () => {
  it("leaves unique ids alone (the same array, nothing allocated)", () => {
    expect(uniqueIds([call("a"), call("b")])).toBeUndefined();
    expect(uniqueIds([])).toBeUndefined();
  });

  it("renames the second and later calls of an id, skipping names another call has", () => {
    const calls = [call("x"), call("x"), call("x_2"), call("x")];
    expect(uniqueIds(calls)?.map((c) => c.id)).toEqual(["x", "x_3", "x_2", "x_4"]);
    expect(uniqueIds(calls)).toEqual(uniqueIds(calls)); // a function of the calls alone
    const many = Array.from({ length: 40 }, (_, i) => call(i === 39 ? "c0" : `c${i}`));
    expect(uniqueIds(many)?.at(-1)?.id).toBe("c0_2");
  });
});

describe("a stored history an older version wrote", () => {
  const log: Message[] = [
    { role: "user", content: "go" },
    {
      role: "assistant",
      content: "",
      toolCalls: [call("x", "read"), call("x", "write"), call("y", "read", "{"), call("z", "read", "7")],
    },
    { role: "tool", toolCallId: "x", name: "write", content: "wrote", isError: false },
    { role: "tool", toolCallId: "x", name: "read", content: "read", isError: false },
  ];

  it("gets unique ids, each result following its call by tool name, and unreadable arguments marked", () => {
    const repaired = inCallOrder(log);
    const assistant = repaired[1] as Extract<Message, { role: "assistant" }>;
    expect(assistant.toolCalls?.map((c) => [c.id, c.name, c.invalid !== undefined])).toEqual([
      ["x", "read", false],
      ["x_2", "write", false],
      ["y", "read", true],
      ["z", "read", true],
    ]);
    expect(repaired.slice(2).map((m) => m.role === "tool" && [m.toolCallId, m.content])).toEqual([
      ["x", "read"],
      ["x_2", "wrote"],
    ]);
    // Untouched originals; a repaired history needs no more repair, and loads the same again.
    expect((log[1] as { toolCalls: ToolCall[] }).toolCalls[1]?.id).toBe("x");
    expect(repairedHistory(repaired)).toBeUndefined();
    expect(inCallOrder(log)).toEqual(repaired);
    expect(repairedHistory(log)?.[1]).toEqual(assistant);
  });

  it("a result already naming a renamed call keeps it", () => {
    const later = [
      ...log.slice(0, 2),
      { ...(log[2] as Message), toolCallId: "x_2" } as Message,
      log[3] as Message,
    ];
    expect(
      inCallOrder(later)
        .slice(2)
        .map((m) => m.role === "tool" && m.toolCallId),
    ).toEqual(["x", "x_2"]);
  });
});
