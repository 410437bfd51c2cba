import { z } from "zod";
import type { AnyAgent } from "../agent/agent.js";
import { type ClientTool, type ClientToolResult, pendingClientCalls } from "../agent/state.js";
import type { RunResult } from "../core/events.js";
import { echoed } from "../core/redact.js";
import type { ToolChoice } from "../models/adapter.js";
import type { RequestProblem } from "./openai-compat.js";

// The client's own tools (SPEC section 14): the `tools`, `tool_choice` and `parallel_tool_calls` of
// a Chat Completions or Responses request, the calls a paused run hands the client, and the
// results that continue it.

const parameters = z.record(z.string(), z.unknown());
/** Chat Completions: `{ type: "function", function: { name, description, parameters } }`. */
const chatTool = z.object({
  type: z.string(),
  function: z
    .object({ name: z.string(), description: z.string().nullish(), parameters: parameters.nullish() })
    .loose()
    .optional(),
});
/** Responses: `{ type: "function", name, description, parameters }`. */
const responsesTool = z
  .object({ type: z.string(), name: z.string().optional(), description: z.string().nullish() })
  .loose();
const namedChoice = z.object({
  type: z.literal("function"),
  name: z.string().optional(),
  function: z.object({ name: z.string() }).optional(),
});
const toolChoice = z.union([z.enum(["auto", "none", "required"]), namedChoice.loose()]);

/** The fields of a request body this module reads, for both APIs. */
export const clientToolFields = {
  tools: z.array(z.union([chatTool.loose(), responsesTool])).nullish(),
  tool_choice: toolChoice.nullish(),
  parallel_tool_calls: z.boolean().nullish(),
};

/** What a request says of its own tools. */
export interface ClientToolRequest {
  /** The function tools to offer (none for `tool_choice: "none"`). */
  tools: ClientTool[];
  toolChoice: ToolChoice | undefined;
  parallelToolCalls: boolean | undefined;
  /** As the request said it, for the Responses object's `tool_choice`. */
  choiceEchoed: unknown;
}

const NAME = /^[a-zA-Z0-9_-]{1,64}$/;

/**
 * The function tools of a request, checked against the agent's own (a name must be valid, unique
 * and none of the agent's tools), with its `tool_choice` (which must name one of them) and
 * `parallel_tool_calls`; or the problem for a 400. Undefined when it sends no tools.
 */
export function clientToolsOf(
  request: {
    tools?: z.infer<typeof clientToolFields.tools>;
    tool_choice?: z.infer<typeof clientToolFields.tool_choice>;
    parallel_tool_calls?: boolean | null;
  },
  agent: AnyAgent,
): ClientToolRequest | RequestProblem | undefined {
  const given = request.tools ?? [];
  if (given.length === 0) return undefined;
  const own = new Set(agent.tools.map((tool) => tool.name));
  const tools: ClientTool[] = [];
  for (const [i, tool] of given.entries()) {
    const param = `tools.${i}`;
    if (tool.type !== "function") {
      const message = `${param}: tools of type '${echoed(tool.type)}' are not supported: send function tools, which the client runs itself.`;
      return { message, param: `${param}.type` };
    }
    const fn: { name?: unknown; description?: unknown; parameters?: unknown } =
      "function" in tool && tool.function ? tool.function : tool;
    const name = fn.name;
    if (typeof name !== "string") return { message: `${param}: a function tool needs a name.`, param };
    const problem = !NAME.test(name)
      ? "is not a valid tool name: use 1 to 64 of a-z A-Z 0-9 _ -"
      : own.has(name)
        ? "is the name of one of the agent's own tools: rename the client's tool"
        : tools.some((t) => t.name === name)
          ? "is given twice: tool names must be unique"
          : undefined;
    if (problem) return { message: `${param}: '${echoed(name)}' ${problem}.`, param: `${param}.name` };
    const schema = fn.parameters;
    tools.push({
      name,
      description: typeof fn.description === "string" ? fn.description : "",
      parameters:
        typeof schema === "object" && schema !== null
          ? (schema as Record<string, unknown>)
          : { type: "object", properties: {} },
    });
  }
  const choice = request.tool_choice ?? undefined;
  const parallelToolCalls = request.parallel_tool_calls ?? undefined;
  if (choice === "none") return { tools: [], toolChoice: undefined, parallelToolCalls, choiceEchoed: choice };
  if (choice === undefined || choice === "auto")
    return { tools, toolChoice: undefined, parallelToolCalls, choiceEchoed: choice ?? "auto" };
  if (choice === "required")
    return { tools, toolChoice: "required", parallelToolCalls, choiceEchoed: choice };
  const name = choice.name ?? choice.function?.name;
  if (name === undefined || !tools.some((t) => t.name === name)) {
    const message = `tool_choice: name one of the request's function tools (${tools.map((t) => t.name).join(", ")}).`;
    return { message, param: "tool_choice" };
  }
  return { tools, toolChoice: { name }, parallelToolCalls, choiceEchoed: { type: "function", name } };
}

/**
 * The id a client sees of a call of its tool: the run's id, two underscores, the call's own id
 * (only letters, digits, `_` and `-`, as every provider takes). The result the client sends back
 * under it finds the run on any replica sharing the store.
 */
function wireCallId(runId: string, callId: string): string {
  return `${runId}__${callId}`;
}

/** The run and call a client's call id names (see `wireCallId`); undefined for an id of another origin. */
function readCallId(id: string): { runId: string; callId: string } | undefined {
  const at = id.indexOf("__");
  if (at <= 0 || at + 2 >= id.length) return undefined;
  return { runId: id.slice(0, at), callId: id.slice(at + 2) };
}

/** A call a paused run hands the client: its wire id, its tool, its arguments as the model wrote them. */
export interface WireToolCall {
  id: string;
  name: string;
  arguments: string;
}

/** The client's calls a run that stopped on `tool_calls` waits on, in call order; none for other stops. */
export function clientCallsOf(result: RunResult): WireToolCall[] {
  if (result.stopReason !== "tool_calls") return [];
  return pendingClientCalls(result.state).map((call) => ({
    id: wireCallId(result.runId, call.id),
    name: call.name,
    arguments: call.arguments,
  }));
}

/** Results the client sent (tool messages, `function_call_output` items), each at its `param`. */
export interface SentResult {
  /** The call id as the client sent it. */
  id: string;
  content: string;
  param: string;
}

/**
 * The run the results continue and the results under the run's own call ids; or the problem when
 * an id is not one this server handed out (`runId`: the run the request names otherwise, the
 * Responses API's `previous_response_id`) or the ids name several runs.
 */
export function resultsFor(
  sent: readonly SentResult[],
  runId: string | undefined,
): { runId: string; results: ClientToolResult[] } | RequestProblem {
  const results: ClientToolResult[] = [];
  let run = runId;
  for (const { id, content, param } of sent) {
    const read = readCallId(id);
    if (!read || (run !== undefined && read.runId !== run)) {
      const message = `${param}: '${echoed(id)}' is not the id of a call this server's run ${run ?? ""} handed out: send the results of the calls of the last response, under their ids.`;
      return { message: message.replace(" run  handed", " runs handed"), param };
    }
    run = read.runId;
    results.push({ id: read.callId, content });
  }
  if (run === undefined) return { message: "No tool results to continue a run with.", param: "messages" };
  return { runId: run, results };
}
