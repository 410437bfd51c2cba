// One MCP tool call that runs the agent (SPEC section 14): its events as progress notifications,
// its approvals as elicitation, its result as the tool's.
import type { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { RequestHandlerExtra } from "@modelcontextprotocol/sdk/shared/protocol.js";
import type { CallToolResult, ServerNotification, ServerRequest } from "@modelcontextprotocol/sdk/types.js";
import type { AgentOptions } from "../agent/agent.js";
import type { RunHandle } from "../agent/handle.js";
import type { PendingApproval, RunResult, StopReason } from "../core/events.js";

/** What the SDK hands a tool's handler: the call's signal, `_meta.progressToken`, its notifications. */
export type CallExtra = RequestHandlerExtra<ServerRequest, ServerNotification>;

export type Approver = NonNullable<AgentOptions["onApproval"]>;

/** How long a person may take to answer an approval form before the call is denied. */
const APPROVAL_TIMEOUT_MS = 10 * 60_000;
/** Longest arguments shown in an approval form. */
const MAX_SHOWN_ARGUMENTS = 2_000;

/**
 * Asks the client's user about a call that needs approval, through elicitation (a form with a
 * boolean `approve`), when the client declared it can be asked (form elicitation); undefined
 * otherwise. Decline, cancel, a form not approved or a failed request deny the call, as `n` does.
 */
export function elicitingApprover(server: McpServer, extra: CallExtra): Approver | undefined {
  const elicitation = server.server.getClientCapabilities()?.elicitation;
  if (!elicitation || (elicitation.form === undefined && elicitation.url !== undefined)) return undefined;
  return async (call) => {
    try {
      const answer = await server.server.elicitInput(
        {
          mode: "form",
          message: approvalMessage(call),
          requestedSchema: {
            type: "object",
            properties: {
              approve: {
                type: "boolean",
                title: "Approve",
                description: `Run ${call.name} with these arguments`,
              },
            },
            required: ["approve"],
          },
        },
        { relatedRequestId: extra.requestId, signal: extra.signal, timeout: APPROVAL_TIMEOUT_MS },
      );
      return answer.action === "accept" && answer.content?.approve === true ? "approve" : "deny";
    } catch {
      return "deny";
    }
  };
}

function approvalMessage(call: PendingApproval): string {
  const args = JSON.stringify(call.arguments);
  const shown = args.length > MAX_SHOWN_ARGUMENTS ? `${args.slice(0, MAX_SHOWN_ARGUMENTS)}…` : args;
  return `The agent wants to call the tool '${call.name}' with the arguments ${shown}. Approve this call?`;
}

export const errorResult = (text: string): CallToolResult => ({
  content: [{ type: "text", text }],
  isError: true,
});

/**
 * Runs `handle` to its end for one tool call: with a progress token, each event (SPEC section 3)
 * is one progress notification, `message` the event's JSON, `progress` counting up from 1. The
 * call's signal aborts the run (the caller passed it to the run). Rejects only when the run does
 * (a checkpoint failed).
 */
export async function runCall(
  handle: RunHandle,
  extra: CallExtra,
  sessionId: string | undefined,
): Promise<{ result: RunResult; tool: CallToolResult }> {
  const token = extra._meta?.progressToken;
  let progress = 0;
  for await (const event of handle) {
    if (token === undefined || extra.signal.aborted) continue;
    progress++;
    // A notification that cannot be sent (the client went away) does not stop the run.
    await extra
      .sendNotification({
        method: "notifications/progress",
        params: { progressToken: token, progress, message: JSON.stringify(event) },
      })
      .catch(() => {});
  }
  const result = await handle.result;
  // The official client drops progress that it reads together with the response (its handler is
  // gone by then): the response goes out after the last notification has had its own turn.
  if (progress > 0) await new Promise((resolve) => setImmediate(resolve));
  return { result, tool: toolResult(result, sessionId) };
}

/** The stops that make the tool's result an error, each with what happened. */
const FAILED: Partial<Record<StopReason, string>> = {
  model_error: "the model API failed",
  circuit_breaker: "the same error repeated until the circuit breaker stopped it",
  budget_exceeded: "its token or cost budget was spent",
  max_iterations: "it reached its iteration limit",
  aborted: "it was aborted (the call was cancelled, or the time limit was reached)",
};

/** The run's result as the tool's: its output as text, an error naming the stop, or how to continue. */
function toolResult(result: RunResult, sessionId: string | undefined): CallToolResult {
  const { stopReason, text } = result;
  const failed = FAILED[stopReason];
  if (failed !== undefined) {
    const error = result.error ? ` ${result.error.message}` : "";
    const iterations = `after ${result.iterations} iteration${result.iterations === 1 ? "" : "s"}`;
    const last = text === "" ? "" : `\n\nIts last text:\n${text}`;
    return errorResult(`The run stopped on ${stopReason} ${iterations}: ${failed}.${error}${last}`);
  }
  if (stopReason === "approval_required") {
    const waiting = waitingText(result.pendingApprovals ?? [], sessionId);
    return { content: [{ type: "text", text: text === "" ? waiting : `${text}\n\n${waiting}` }] };
  }
  if (stopReason === "ask_question") {
    const how =
      sessionId === undefined
        ? "The agent asks this question. To answer it, run the task again with a session, then call run_agent on that session with the answer as the task."
        : `The agent asks this question: call run_agent with session "${sessionId}" and the answer as the task.`;
    return {
      content: [
        { type: "text", text },
        { type: "text", text: how },
      ],
    };
  }
  return { content: [{ type: "text", text }] };
}

/** The calls a run waits on and how to continue it (SPEC section 14). */
function waitingText(pending: readonly PendingApproval[], sessionId: string | undefined): string {
  const count = pending.length === 1 ? "1 tool call" : `${pending.length} tool calls`;
  const calls = pending.map((c) => `- ${c.id}: ${c.name} ${JSON.stringify(c.arguments)}`).join("\n");
  const head = `The run waits for approval of ${count}; ${pending.length === 1 ? "it has not run" : "none of them has run"}:\n${calls}\n\n`;
  if (sessionId === undefined) {
    return `${head}Nothing was stored, so this run cannot be continued: pass a session to run_agent (any id, e.g. "task-1") and send the task again; then continue it on that session with the task "approve" or "deny".`;
  }
  const ids = pending.map((c) => c.id).join(",");
  return `${head}To continue, call run_agent with session "${sessionId}" and the task "approve" (runs ${pending.length === 1 ? "it" : "them all"}) or "deny" (declines ${pending.length === 1 ? "it" : "them all"}); or run: agentloop run --session ${sessionId} --approve ${pending.length === 1 ? ids : "all"} (or --deny, or name the ids: ${ids}).`;
}
