import { type Message, type Part, Role } from "@a2a-js/sdk";
import { describe, expect, it } from "vitest";
import { dataPart, decisionOf, textOf, textPart } from "./a2a-parts.js";

const message = (...parts: Part[]): Message => ({
  messageId: "m",
  contextId: "",
  taskId: "",
  role: Role.ROLE_USER,
  parts,
  metadata: {},
  extensions: [],
  referenceTaskIds: [],
});

describe("decisionOf", () => {
  it("reads approve/yes and deny/no as every waiting call, whatever the case and a final period", () => {
    for (const word of ["approve", "Yes", "YES.", " approve! "])
      expect(decisionOf(message(textPart(word)))).toEqual({ approve: "all" });
    for (const word of ["deny", "No", "no."])
      expect(decisionOf(message(textPart(word)))).toEqual({ deny: "all" });
  });

  it("reads a data part call by call, and says how to decide otherwise", () => {
    expect(decisionOf(message(dataPart({ approve: ["a"], deny: "all" })))).toEqual({
      approve: ["a"],
      deny: "all",
    });
    expect(decisionOf(message(textPart("see below"), dataPart({ deny: ["b"] })))).toEqual({ deny: ["b"] });
    expect(decisionOf(message(textPart("maybe")))).toMatch(
      /^Not understood as a decision\. Reply "approve" or "deny"/,
    );
    expect(decisionOf(message(dataPart({ approve: [1] })))).toMatch(/list of call ids or "all"/);
    expect(decisionOf(message(dataPart({ approve: "all", deny: "all" })))).toMatch(/cannot both be "all"/);
  });
});

describe("textOf", () => {
  it("joins text parts and data parts (as JSON) a line apart; without data when asked", () => {
    const m = message(textPart("Save"), dataPart({ path: "a.txt" }), textPart("now"));
    expect(textOf(m)).toBe('Save\n{"path":"a.txt"}\nnow');
    expect(textOf(m, false)).toBe("Save\nnow");
  });
});
