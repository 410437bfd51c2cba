import { AgentloopError } from "../core/errors.js";
import type { ToolCall } from "../core/messages.js";
import { echoed } from "../core/redact.js";
import type { AwaitingToolsState, ClientTool, RunState } from "../core/run-state.js";
import type { Tool } from "../tools/tool.js";
import { answeredCalls, isClientCall, pendingCalls } from "./state.js";

// The caller's own tools (`RunOptions.clientTools`, SPEC section 14): offered to the model beside the
// agent's, never run by the loop; a call of one pauses the run until the caller sends its result.

export type { ClientTool } from "../core/run-state.js";

const TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

/**
 * A run's client tools, checked: valid names, unique, none of the agent's own (`own`).
 * @throws AgentloopError("invalid_option") naming the tool at fault.
 */
export function checkClientTools(tools: readonly ClientTool[], own: readonly Tool[]): ClientTool[] {
  const owned = new Set(own.map((tool) => tool.name));
  const seen = new Set<string>();
  for (const { name } of tools) {
    const problem = !TOOL_NAME.test(name)
      ? "is not a valid tool name (1 to 64 of a-z A-Z 0-9 _ -)"
      : owned.has(name)
        ? "is one of the agent's own tools: rename the client tool"
        : seen.has(name)
          ? "is given twice: tool names must be unique"
          : undefined;
    if (problem) throw new AgentloopError("invalid_option", `Client tool '${echoed(name)}' ${problem}.`);
    seen.add(name);
  }
  return tools.map(({ name, description, parameters }) => ({ name, description, parameters }));
}

/** A client tool as the loop offers it: any arguments object goes to the caller, who validates them. */
export function clientTool(spec: ClientTool): Tool {
  return {
    ...spec,
    external: true,
    validate: (args) => ({ ok: true, value: args }),
    execute: () => {
      throw new Error(`'${spec.name}' is run by the caller.`);
    },
  };
}

/** The pending calls of the caller's own tools that have no result yet, in call order. */
export function pendingClientCalls(state: RunState): ToolCall[] {
  if (!state.pending || !state.clientTools) return [];
  const done = answeredCalls(state);
  return pendingCalls(state).filter((call) => !done.has(call.id) && isClientCall(state, call));
}

/** A result the caller of a run sends for a call of one of its own tools. */
export interface ClientToolResult {
  /** The call's id. */
  id: string;
  content: string;
  isError?: boolean;
}

/**
 * Records the caller's results for the calls a run waits on (`awaiting_tools`), one for each.
 * @throws AgentloopError("invalid_state") naming the waiting calls, for an id that is not one of
 * them, or when one of them has no result.
 */
export function recordClientResults(state: AwaitingToolsState, results: readonly ClientToolResult[]): void {
  const waiting = pendingClientCalls(state);
  const names = () => waiting.map((call) => `${call.id} (${call.name})`).join(", ") || "none";
  const given = new Map(results.map((r) => [r.id, r]));
  for (const id of given.keys()) {
    if (!waiting.some((call) => call.id === id))
      throw new AgentloopError(
        "invalid_state",
        `No call '${echoed(id)}' waits for a result; waiting: ${names()}.`,
      );
  }
  const missing = waiting.filter((call) => !given.has(call.id));
  if (missing.length > 0) {
    const list = missing.map((call) => `${call.id} (${call.name})`).join(", ");
    throw new AgentloopError(
      "invalid_state",
      `No result for the calls ${list}: send one for each waiting call.`,
    );
  }
  for (const call of waiting) {
    const result = given.get(call.id) as ClientToolResult;
    state.messages.push({
      role: "tool",
      toolCallId: call.id,
      name: call.name,
      content: result.content,
      isError: result.isError === true,
    });
  }
}
