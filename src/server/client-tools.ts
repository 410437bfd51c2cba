import { z } from "zod";
import type { AnyAgent } from "../agent/agent.js";
import { type ClientTool, type ClientToolResult, pendingClientCalls } from "../agent/client-tools.js";
import { pendingCalls, type RunState } from "../agent/state.js";
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

/** What a run id of this server is made of: its kind (`c` a chat completion's, `r` a response's) and 16 random bytes. */
const RUN_ID =
  /^(?:chatcmpl-([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})|resp_([0-9a-f]{32}))$/;
const WIRE_ID = /^call_([cr])([A-Za-z0-9_-]{22})_(\d{1,4})$/;

/**
 * The id a client sees of a call of its tool: `call_`, the run's kind and id (base64url), `_`, the
 * call's place in its reply. At most 34 characters of `A-Z a-z 0-9 _ -` (OpenAI takes tool call
 * ids of 40 at most), and the result the client sends back under it finds the run on any replica
 * sharing the store.
 */
function wireCallId(runId: string, index: number): string {
  const match = RUN_ID.exec(runId);
  const hex = match?.[1]?.replaceAll("-", "") ?? match?.[2];
  // Every run of the server has such an id; another would not be found again anyway.
  if (!hex) return `call_${runId}_${index}`;
  return `call_${match?.[1] ? "c" : "r"}${Buffer.from(hex, "hex").toString("base64url")}_${index}`;
}

/** The run and the call's place in its reply that a client's call id names (see `wireCallId`); undefined for another id. */
function readCallId(id: string): { runId: string; index: number } | undefined {
  const match = WIRE_ID.exec(id);
  if (!match) return undefined;
  const hex = Buffer.from(match[2] as string, "base64url").toString("hex");
  const runId =
    match[1] === "c"
      ? `chatcmpl-${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`
      : `resp_${hex}`;
  return { runId, index: Number(match[3]) };
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
  const calls = pendingCalls(result.state);
  return pendingClientCalls(result.state).map((call) => ({
    id: wireCallId(result.runId, calls.indexOf(call)),
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

/** The results of a request, by the place of their call in the reply the run waits on. */
export interface PlacedResults {
  runId: string;
  results: (SentResult & { index: number })[];
}

/**
 * The run the results continue, and each result's call; or the problem when an id is not one this
 * server handed out (`runId`: the run the request names otherwise, the Responses API's
 * `previous_response_id`) or the ids name several runs.
 */
export function resultsFor(
  sent: readonly SentResult[],
  runId: string | undefined,
): PlacedResults | RequestProblem {
  const results: PlacedResults["results"] = [];
  let run = runId;
  for (const result of sent) {
    const read = readCallId(result.id);
    if (!read || (run !== undefined && read.runId !== run)) {
      const message = `${result.param}: '${echoed(result.id)}' is not the id of a call ${run === undefined ? "this server handed out" : `of run ${run}`}: send the results of the calls of the last response, under their ids.`;
      return { message, param: result.param };
    }
    run = read.runId;
    results.push({ ...result, index: read.index });
  }
  if (run === undefined) return { message: "No tool results to continue a run with.", param: "messages" };
  return { runId: run, results };
}

/**
 * The results under the run's own call ids, or the problem naming a result whose call the run does
 * not wait on, or the waiting calls that have none.
 */
export function resultsOf(state: RunState, placed: PlacedResults): ClientToolResult[] | RequestProblem {
  const calls = pendingCalls(state);
  const out: ClientToolResult[] = [];
  for (const { index, content, param, id } of placed.results) {
    const call = calls[index];
    if (!call) {
      const message = `${param}: no call '${echoed(id)}' waits for a result in run ${placed.runId}.`;
      return { message, param };
    }
    out.push({ id: call.id, content });
  }
  const missing = pendingClientCalls(state).filter((call) => !out.some((r) => r.id === call.id));
  if (missing.length > 0) {
    const ids = missing.map((call) => `${wireCallId(placed.runId, calls.indexOf(call))} (${call.name})`);
    const message = `No result for the calls ${ids.join(", ")}: send one for each call of the last response.`;
    return { message, param: placed.results[0]?.param ?? "messages" };
  }
  return out;
}
