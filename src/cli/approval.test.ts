import { describe, expect, it } from "vitest";
import { z } from "zod";
import { Agent } from "../agent/agent.js";
import { scriptedModel } from "../testing/scripted-model.js";
import { defineTool, type Tool } from "../tools/tool.js";
import { approvalRules, describeCall, globMatcher } from "./approval.js";

const tool = (name: string, extra: Partial<Tool> = {}): Tool => ({
  ...defineTool({ name, description: name, parameters: z.object({}), execute: () => `${name} ran` }),
  ...extra,
});

/** The calls that waited when the agent ran one call of each tool. */
async function waiting(tools: readonly Tool[]): Promise<string[]> {
  const model = scriptedModel([
    { toolCalls: tools.map((t, i) => ({ id: `c${i}`, name: t.name, arguments: {} })) },
  ]);
  // One iteration: the calls that need no approval run, and the model is not asked again.
  const result = await new Agent({ model, tools, maxIterations: 1 }).run("go");
  return (result.pendingApprovals ?? []).map((call) => call.name);
}

describe("which calls need approval", () => {
  it("an MCP destructiveHint asks unless the tool's own needsApproval says otherwise", async () => {
    const tools = [
      tool("destructive", { annotations: { destructiveHint: true } }),
      tool("read_only", { annotations: { readOnlyHint: true, destructiveHint: false } }),
      tool("own_rule_wins", { annotations: { destructiveHint: true }, needsApproval: false }),
      tool("plain"),
    ];
    expect(await waiting(tools)).toEqual(["destructive"]);
  });

  it("config allow wins over the annotation, never over needsApproval; require asks; globs match whole names", async () => {
    const rules = approvalRules({
      require: ["delete_*", "mov?"],
      allow: ["write_*", "delete_tmp", "guarded"],
    });
    const tools = rules([
      tool("write_file", { annotations: { destructiveHint: true } }),
      tool("guarded", { needsApproval: true }),
      tool("delete_file"),
      tool("delete_tmp"),
      tool("move"),
      tool("moved"),
      tool("xdelete_file"),
    ]);
    expect(await waiting(tools)).toEqual(["guarded", "delete_file", "move"]);
    // The same tool objects come back for the same input (the prompt prefix stays byte-identical).
    expect(rules([tools[0] as Tool])[0]).toBe(rules([tools[0] as Tool])[0]);
  });

  it("globs: * any run, ? one character, everything else literal", () => {
    const match = globMatcher(["a.b", "x*", "?y"]);
    expect(["a.b", "x", "xyz", "zy"].map(match)).toEqual([true, true, true, true]);
    expect(["aXb", "yx", "zzy", "y"].map(match)).toEqual([false, false, false, false]);
    expect(globMatcher([])("anything")).toBe(false);
  });
});

describe("a call shown to a person", () => {
  it("names the tool and the call, one argument a line, long values cut with their length", () => {
    const text = describeCall(
      { id: "c1", name: "write_file", arguments: { path: "notes.txt", content: "x".repeat(1000) } },
      false,
    );
    const lines = text.split("\n");
    expect(lines[0]).toBe("write_file wants to run (c1)");
    expect(lines[1]).toBe('    path: "notes.txt"');
    expect(lines[2]).toMatch(/^ {4}content: "x{150,}… \(1002 characters\)$/);
    expect(lines[2]?.length).toBeLessThan(200);
    expect(describeCall({ id: "c2", name: "now", arguments: {} }, false)).toBe(
      "now wants to run (c2)\n    (no arguments)",
    );
  });
});
