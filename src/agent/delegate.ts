/**
 * Sub-agents (SPEC section 10): the `delegate_task` tool, `agent.asTool()`, and a child run started
 * from a call. A child is a run like any other (`Agent.startChild`: its own state, loop, guards and
 * output schema); what makes it part of a tree is its `TreeNode`: the top-level run's usage for the
 * budget, the usage of every run above it, the one way the tree is stored, and the one `onApproval`.
 * Its state lives in its parent's (`RunState.children`), so every checkpoint stores the whole tree
 * at once and a resumed parent finds each child where it stopped.
 */
import { AgentloopError } from "../core/errors.js";
import type { AgentEvent, PendingApproval } from "../core/events.js";
import type { Usage } from "../core/messages.js";
import type { ChildRun, RunState } from "../core/run-state.js";
import { callRun } from "../tools/execute.js";
import { WAITS } from "../tools/outcome.js";
import type { Tool, ToolContext, ValidationResult } from "../tools/tool.js";
import type { AnyAgent } from "./agent.js";
import type { Budget } from "./prompt.js";
import type { ApprovalDecision, LoopOptions, Run } from "./run.js";

/** Sub-agents nest at most this deep unless `maxDepth` says otherwise. */
const DEFAULT_MAX_DEPTH = 3;

/** Sub-agent and agent tool names: what providers take as a tool name. */
const AGENT_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

/** A run's place in a delegation tree: on every run of an agent with sub-agents, and every child's. */
export interface TreeNode {
  /** This run's state; its `children` grow as it delegates. */
  readonly state: RunState;
  /** 0 for the top-level run, 1 for its children. */
  readonly depth: number;
  /** The run that started this one (undefined at the top). */
  readonly parent: TreeNode | undefined;
  /** A child's name and the id of the call that started it (undefined at the top). */
  readonly agent: string | undefined;
  readonly parentCallId: string | undefined;
  /** The top-level run's usage, which includes every child's: what the budget is checked against. */
  readonly usage: Usage;
  /** The usage of each run above this one, which this run's model calls add to (none at the top). */
  readonly above: readonly Usage[];
  readonly root: TreeRoot;
  /** Nobody listens to this run's events (set by its loop): its children then run without making any. */
  quiet: boolean;
}

/** What the whole tree shares: set by the top-level run. */
interface TreeRoot {
  readonly maxDepth: number;
  /** The tree's token and cost limits (the time limit reaches the children through their signal). */
  readonly budget: Budget;
  /** Stores the top-level state, and with it every child's (one write at a time); none without a store. */
  readonly save: (() => Promise<void>) | undefined;
  /** The top-level run's `onApproval`: a child's calls are decided the same way. */
  readonly onApproval: LoopOptions["onApproval"];
}

/** How a child run joins its tree (`Agent.startChild`). */
export interface ChildLink {
  parent: TreeNode;
  /** The child's name, as its parent delegates to it. */
  agent: string;
  /** The id of the parent's call that starts it. */
  callId: string;
  /** The delegating call's signal: the parent's abort and time limit. */
  signal: AbortSignal;
}

/**
 * A run's place in a tree and the checkpoint it runs with: a child's (`link`) stores the tree
 * through the top-level run; a run whose tools can delegate is the root of one, its checkpoint made
 * serial; any other run has none (and pays nothing).
 */
export function treeOf(
  state: RunState,
  link: ChildLink | undefined,
  loop: LoopOptions,
  maxDepth: number | undefined,
  checkpoint: ((state: RunState) => Promise<void>) | undefined,
): { tree: TreeNode | undefined; checkpoint: ((state: RunState) => Promise<void>) | undefined } {
  if (link) {
    const { save } = link.parent.root;
    return { tree: childNode(state, link), checkpoint: save && (() => save()) };
  }
  if (!hasAgentTools(loop.tools)) return { tree: undefined, checkpoint };
  const root = rootNode(state, maxDepth ?? DEFAULT_MAX_DEPTH, loop.budget, checkpoint, loop.onApproval);
  return { tree: root.node, checkpoint: root.checkpoint };
}

/** The top-level run's node, with its checkpoint made serial (its children store through it too). */
function rootNode(
  state: RunState,
  maxDepth: number,
  budget: Budget,
  checkpoint: ((state: RunState) => Promise<void>) | undefined,
  onApproval: LoopOptions["onApproval"],
): { node: TreeNode; checkpoint: ((state: RunState) => Promise<void>) | undefined } {
  // Children checkpoint while their parent does: one write at a time, each of the latest state.
  const serial = checkpoint && oneAtATime(checkpoint);
  const save = serial && (() => serial(state));
  // Parallel children ask one at a time, as one run does: a person answers one question at once.
  const ask = onApproval && oneAtATime(onApproval);
  const root: TreeRoot = { maxDepth, budget: limitsOf(budget), save, onApproval: ask };
  const node: TreeNode = {
    state,
    depth: 0,
    parent: undefined,
    agent: undefined,
    parentCallId: undefined,
    usage: state.usage,
    above: [],
    root,
    quiet: false,
  };
  return { node, checkpoint: serial };
}

/** `f`, called again only once its last call has settled. */
function oneAtATime<A, R>(f: (arg: A) => R | Promise<R>): (arg: A) => Promise<R> {
  let last: Promise<unknown> = Promise.resolve();
  return (arg) => {
    const next = last.then(() => f(arg));
    last = next.catch(() => {});
    return next;
  };
}

const limits = new WeakMap<Budget, Budget>();

/** The token and cost limits of `budget` (the same object for the same budget: children's options are cached by it). */
function limitsOf(budget: Budget): Budget {
  if (budget.timeoutMs === undefined) return budget;
  let found = limits.get(budget);
  if (!found) {
    const { timeoutMs: _time, ...rest } = budget;
    found = rest;
    limits.set(budget, found);
  }
  return found;
}

/** A child run's node, below `link.parent`. */
function childNode(state: RunState, link: ChildLink): TreeNode {
  const { parent } = link;
  return {
    state,
    depth: parent.depth + 1,
    parent,
    agent: link.agent,
    parentCallId: link.callId,
    usage: parent.usage,
    above: [parent.state.usage, ...parent.above],
    root: parent.root,
    quiet: false,
  };
}

/**
 * The tree's `onApproval` for a child's calls: it names the agent and the child run. A tool the
 * person allows for good ("always") is allowed in every run above too, so the children those
 * start later do not ask about it again (a new child starts with its parent's allowed tools).
 */
export function childApproval(link: ChildLink, state: RunState): LoopOptions["onApproval"] {
  const ask = link.parent.root.onApproval;
  if (!ask) return undefined;
  const { agent } = link;
  return async (call: PendingApproval): Promise<ApprovalDecision> => {
    const answer = await ask(call.agent === undefined ? { ...call, agent, runId: state.runId } : call);
    if (answer === "always")
      for (let node: TreeNode | undefined = link.parent; node; node = node.parent)
        if (!node.state.allowedTools.includes(call.name)) node.state.allowedTools.push(call.name);
    return answer;
  };
}

/** Marks the tools that run an agent, so an agent that has one gives its runs a tree. */
const AGENT_TOOLS = new WeakSet<Tool>();

const withAgents = new WeakMap<readonly Tool[], boolean>();

/** Whether a tool list has `delegate_task` or an agent tool (once per list: an agent's runs share it). */
function hasAgentTools(tools: readonly Tool[]): boolean {
  let found = withAgents.get(tools);
  if (found === undefined) {
    found = tools.some((tool) => AGENT_TOOLS.has(tool));
    withAgents.set(tools, found);
  }
  return found;
}

/**
 * The `delegate_task` tool of an agent with `agents` (undefined without any), its options checked.
 * @throws AgentloopError("invalid_option") for a name that is not valid, an entry that is not an
 * Agent, a `maxDepth` that is not a positive integer.
 */
export function delegateToolOf(
  agents: Readonly<Record<string, AnyAgent>> | undefined,
  maxDepth: number | undefined,
): Tool | undefined {
  if (maxDepth !== undefined && (!Number.isInteger(maxDepth) || maxDepth < 1))
    throw new AgentloopError("invalid_option", `maxDepth must be a positive integer, got ${maxDepth}.`);
  if (!agents || Object.keys(agents).length === 0) return undefined;
  for (const [name, agent] of Object.entries(agents)) {
    if (!AGENT_NAME.test(name))
      throw new AgentloopError(
        "invalid_option",
        `agents: '${name}' is not a valid sub-agent name: use 1 to 64 of a-z A-Z 0-9 _ -.`,
      );
    if (typeof (agent as Partial<AnyAgent> | undefined)?.startChild !== "function")
      throw new AgentloopError("invalid_option", `agents.${name} must be an Agent (new Agent({ ... })).`);
  }
  return delegateTool(agents);
}

/**
 * The `delegate_task` tool: `agent` one of the names (an enum), `task` the child's instructions.
 * The description lists each agent with its description.
 */
function delegateTool(agents: Readonly<Record<string, AnyAgent>>): Tool {
  const names = Object.keys(agents);
  const list = names.map((name) => `- ${name}: ${agents[name]?.options.description ?? ""}`.trimEnd());
  const tool: Tool = {
    name: "delegate_task",
    description: `Hands a task to a sub-agent, which works on it alone (it sees nothing of this conversation but the task) and returns its answer. Sub-agents:\n${list.join("\n")}`,
    parameters: {
      type: "object",
      properties: {
        agent: { type: "string", enum: names, description: "The sub-agent to hand the task to." },
        task: {
          type: "string",
          description: "The task, with everything the sub-agent needs to know to do it.",
        },
      },
      required: ["agent", "task"],
      additionalProperties: false,
    },
    timeoutMs: 0, // a child has the run's limits, not a tool's
    validate: (args) => {
      const given = args as { agent?: unknown; task?: unknown };
      if (typeof given.agent !== "string")
        return invalid(`'agent' must be the name of a sub-agent: one of ${names.join(", ")}.`);
      if (!Object.hasOwn(agents, given.agent))
        return invalid(`There is no sub-agent '${given.agent}': use one of ${names.join(", ")}.`);
      if (typeof given.task !== "string")
        return invalid("'task' must be a string: the sub-agent's instructions.");
      return { ok: true, value: args };
    },
    execute: (args, context) => {
      const { agent, task } = args as { agent: string; task: string };
      return runChild(agents[agent] as AnyAgent, agent, task, context);
    },
  };
  AGENT_TOOLS.add(tool);
  return tool;
}

/** `agent.asTool({ name, description })`: a tool (`task`) that runs `agent` as a sub-agent. */
export function agentTool(agent: AnyAgent, name: string, description: string): Tool {
  if (!AGENT_NAME.test(name))
    throw new AgentloopError(
      "invalid_tool",
      `asTool: the name '${name}' is not a valid tool name: use 1 to 64 of a-z A-Z 0-9 _ -.`,
    );
  const tool: Tool = {
    name,
    description,
    parameters: {
      type: "object",
      properties: {
        task: { type: "string", description: "The task, with everything the agent needs to know to do it." },
      },
      required: ["task"],
      additionalProperties: false,
    },
    timeoutMs: 0,
    validate: (args) =>
      typeof (args as { task?: unknown }).task === "string"
        ? { ok: true, value: args }
        : invalid("'task' must be a string: the agent's instructions."),
    execute: (args, context) => runChild(agent, name, (args as { task: string }).task, context),
  };
  AGENT_TOOLS.add(tool);
  return tool;
}

const invalid = (message: string): ValidationResult => ({ ok: false, message });

/**
 * Runs `agent` as a child of the call's run (or continues the child that call started before a
 * crash or an approval), forwarding its events, tagged, to the parent's stream. Its answer is the
 * result; `ask_question` comes back as a result; a wait for approvals makes the call wait (`WAITS`);
 * any other stop is an error naming the agent, the stop reason and its last text.
 */
async function runChild(agent: AnyAgent, name: string, task: string, context: ToolContext): Promise<unknown> {
  const call = callRun(context);
  const parent = call && (call.run as Run).tree;
  if (!call || !parent) throw new Error(`Sub-agent '${name}' can only run as a tool of an agent's run.`);
  const { state, depth, root } = parent;
  if (depth + 1 > root.maxDepth)
    throw new Error(
      `Cannot delegate to '${name}': sub-agents nest at most ${root.maxDepth} deep (maxDepth) and this run is at depth ${depth}. Do this task yourself.`,
    );
  const callId = context.toolCallId;
  const { iteration } = state;
  state.children ??= [];
  const { children } = state;
  const { runId } = state;
  let child = children.find(
    (c) => c.parentCallId === callId && c.iteration === iteration && c.parentRunId === runId,
  );
  // A child that finished before a crash is not run again.
  if (child && child.state.status !== "running" && child.state.status !== "awaiting_approval")
    return resultOf(child);
  const link: ChildLink = { parent, agent: name, callId, signal: context.signal };
  const handle = agent.startChild(child ? child.state : task, link);
  if (!child) {
    handle.state.allowedTools.push(...state.allowedTools);
    child = {
      agent: name,
      parentRunId: runId,
      parentCallId: callId,
      iteration,
      depth: depth + 1,
      state: handle.state,
    };
    children.push(child);
  }
  if (!parent.quiet) {
    const origin = { parentRunId: state.runId, parentCallId: callId, agent: name, depth: depth + 1 };
    for await (const event of handle) {
      // A grandchild's events carry their own origin already.
      call.forward(event.parentRunId === undefined ? ({ ...event, ...origin } as AgentEvent) : event);
    }
  }
  await handle.result;
  return resultOf(child);
}

/** The delegating call's result from how its child stopped. */
function resultOf(child: ChildRun): unknown {
  const { state, agent } = child;
  switch (state.stopReason) {
    case "final_answer":
    case "task_completion":
    case "converse":
      return state.output;
    case "ask_question":
      return `Sub-agent '${agent}' asks: ${state.output}`;
    case "approval_required":
      return WAITS;
    default: {
      const why = state.error ? ` (${state.error.message})` : "";
      throw new Error(
        `Sub-agent '${agent}' stopped with ${state.stopReason ?? "no result"}${why}; its last text: ${state.output || "(none)"}`,
      );
    }
  }
}
