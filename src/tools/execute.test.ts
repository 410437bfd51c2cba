import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { Agent, defineTool, type ToolContext } from "../index.js";
import { scriptedModel } from "../testing/index.js";

const hang = (name: string, timeoutMs: number, seen?: (context: ToolContext) => void) =>
  defineTool({
    name,
    description: "Never returns.",
    parameters: z.object({}),
    timeoutMs,
    execute: (_args, context) => {
      seen?.(context);
      return new Promise(() => {});
    },
  });

describe("tool calls waiting on a promise", () => {
  it("time out each after its own limit, in one batch", async () => {
    const model = scriptedModel([
      {
        toolCalls: [
          { id: "slow", name: "slow", arguments: {} },
          { id: "quick", name: "quick", arguments: {} },
          { id: "quick2", name: "quick", arguments: {} },
        ],
      },
      { text: "gave up" },
    ]);
    const agent = new Agent({ model, tools: [hang("slow", 60), hang("quick", 15)] });
    const result = await agent.run("wait");
    expect(result.messages.slice(2, 5)).toMatchObject([
      { toolCallId: "slow", isError: true, content: "Tool 'slow' timed out after 60 ms." },
      { toolCallId: "quick", isError: true, content: "Tool 'quick' timed out after 15 ms." },
      { toolCallId: "quick2", isError: true, content: "Tool 'quick' timed out after 15 ms." },
    ]);
    expect(result.output).toBe("gave up");
  });

  it("give the tool a signal that has fired when it reads it after its timeout", async () => {
    let context: ToolContext | undefined;
    const model = scriptedModel([{ toolCalls: [{ name: "hang", arguments: {} }] }, { text: "ok" }]);
    await new Agent({ model, tools: [hang("hang", 10, (c) => (context = c))] }).run("go");
    // Read only now, after the call timed out: made on demand, already aborted.
    expect(context?.signal.aborted).toBe(true);
    expect(context?.toolCallId).toBeTruthy();
  });

  it("leave nothing that keeps the process alive once the run is over", () => {
    // A tool timer of 60 s that stayed referenced would hold this process for a minute.
    const index = fileURLToPath(new URL("../../dist/index.js", import.meta.url));
    const testing = fileURLToPath(new URL("../../dist/testing/index.js", import.meta.url));
    const script = `
      const { Agent, defineTool } = await import(${JSON.stringify(index)});
      const { scriptedModel } = await import(${JSON.stringify(testing)});
      const wait = defineTool({ name: "wait", description: "Waits a little.", parameters: { type: "object" },
        execute: () => new Promise((resolve) => setTimeout(() => resolve("done"), 5)) });
      const model = scriptedModel([{ toolCalls: [{ name: "wait", arguments: {} }] }, { text: "ok" }]);
      const result = await new Agent({ model, tools: [wait] }).run("go");
      console.log(result.messages[2].content, result.output);`;
    const child = spawnSync(process.execPath, ["--input-type=module", "-e", script], {
      encoding: "utf8",
      timeout: 10_000,
    });
    expect(child.stderr).toBe("");
    expect(child.signal).toBeNull(); // not killed by the timeout above
    expect(child.stdout.trim()).toBe("done ok");
  });
});
