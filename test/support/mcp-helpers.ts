// Helpers for the MCP client's tests: call a tool as the loop does, watch processes.
import { existsSync, readFileSync } from "node:fs";
import { errorMessage } from "../../src/core/errors.js";
import type { McpToolset } from "../../src/mcp/index.js";
import type { ToolProgress } from "../../src/tools/tool.js";

/** Runs a tool's execute; a throw becomes an error result, as in the loop. */
export async function call(
  toolset: McpToolset,
  name: string,
  args: Record<string, unknown>,
  context: { signal?: AbortSignal; onProgress?: (progress: ToolProgress) => void } = {},
): Promise<{ content: string; isError: boolean }> {
  const tool = toolset.tools().find((candidate) => candidate.name === name);
  if (!tool) throw new Error(`no tool '${name}'`);
  try {
    const signal = context.signal ?? new AbortController().signal;
    const result = await tool.execute(args, { signal, toolCallId: "call_1", ...context });
    return { content: String(result), isError: false };
  } catch (error) {
    return { content: errorMessage(error), isError: true };
  }
}

/** Whether a process runs; a zombie (ended, not yet reaped by init) counts as ended. */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  if (!existsSync("/proc")) return true;
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
}

export async function until(condition: () => boolean, what: string): Promise<void> {
  for (let waited = 0; !condition(); waited += 20) {
    if (waited > 20_000) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

export const pidOf = (toolset: McpToolset, server: string) =>
  toolset.servers().find((s) => s.name === server)?.pid;
