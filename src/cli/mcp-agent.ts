// The agent as an MCP server (SPEC section 14): the tool `run_agent`, and one tool per sub-agent,
// on an McpServer of the official SDK. The transports (stdio for `agentloop mcp serve`, Streamable
// HTTP for `agentloop serve --mcp`) connect it; how one call runs is in mcp-agent-call.ts.
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import { Agent, type AnyAgent } from "../agent/agent.js";
import type { RunHandle } from "../agent/handle.js";
import { Session } from "../agent/session.js";
import { pendingApprovals } from "../agent/state.js";
import { AgentloopError, errorMessage } from "../core/errors.js";
import { type SessionStore, StoreError } from "../store/types.js";
import { type Approver, type CallExtra, elicitingApprover, errorResult, runCall } from "./mcp-agent-call.js";
import {
  checkSessionId,
  type HeldSession,
  type Plan,
  planRun,
  type SessionRequest,
  sessionLost,
  startPlan,
  stopWhenLost,
  storeFailure,
} from "./session-run.js";

/** Where the sessions of `run_agent` are kept: the store `run --session` uses. */
export interface McpSessions {
  /**
   * Takes session `id` for one call, creating it; `check` sees a session that does not exist yet
   * before it is created. Rejects with an AgentloopError (one line) when sessions cannot be used.
   */
  hold(id: string, check: (fresh: Pick<Session, "id" | "lastRun">) => void): Promise<HeldSession>;
}

/**
 * The sessions of a store: each call takes its session (created on first use) and releases it.
 * `store` gives the store (opened when first needed), or undefined when there is none, which
 * `none` then explains.
 */
export function storeSessions(store: () => Promise<SessionStore | undefined>, none: string): McpSessions {
  return {
    hold: async (id, check) => {
      const opened = await store();
      if (!opened) throw new AgentloopError("config", none);
      if ((await opened.read(id)) === undefined) check({ id, lastRun: undefined });
      const session = await Session.open(opened, id);
      return { session, close: () => session.release().catch(() => {}) };
    },
  };
}

/** A sub-agent offered as an MCP tool of its own name, taking `task`. */
export interface SubAgentInfo {
  name: string;
  description: string;
}

/**
 * Runs `task` on the sub-agent `name`. `signal` aborts it (the client cancelled the call);
 * `onApproval`, when set, asks the client's user about calls that need approval (elicitation):
 * give it to the run's agent. Without it such calls wait and the tool's result says so.
 */
export type RunSubAgent = (
  name: string,
  task: string,
  options: { signal: AbortSignal; onApproval?: Approver },
) => RunHandle;

export interface AgentMcpServerOptions {
  agent: AnyAgent;
  sessions: McpSessions;
  /** The package's version, for the server's `initialize` answer. */
  version: string;
  /** The session of calls that name none (`mcp serve --session`). */
  defaultSession?: string;
  /** One line for the operator (stderr): unexpected failures of a call. */
  log(line: string): void;
  /** The configured sub-agents, each a tool (see `registerSubAgentTools`). */
  subAgents?: { agents: readonly SubAgentInfo[]; run: RunSubAgent };
}

const RUN_AGENT = "run_agent";

/** An MCP server offering the agent as `run_agent` (and its sub-agents as tools); connect it to one transport. */
export function agentMcpServer(options: AgentMcpServerOptions): McpServer {
  const { agent } = options;
  const server = new McpServer(
    { name: "agentloop", version: options.version },
    {
      instructions:
        "run_agent hands a task to an agent that works on it with its own tools until it is done and returns its answer. Name a session to continue a conversation in later calls.",
    },
  );
  server.registerTool(
    RUN_AGENT,
    {
      title: "Run the agent",
      description: describeAgent(agent),
      inputSchema: {
        task: z
          .string()
          .describe("What the agent should do, in plain words (or the answer to its question)."),
        session: z
          .string()
          .optional()
          .describe(
            "A session id (1-128 of A-Z a-z 0-9 . _ -): the conversation is stored under it and the next call with it continues it, e.g. to approve or deny calls the run waits on.",
          ),
      },
    },
    async ({ task, session }, extra) => {
      const id = session ?? options.defaultSession;
      try {
        return await runAgentCall(server, options, task, id, extra);
      } catch (error) {
        return failure(error, options.log);
      }
    },
  );
  const subAgents = options.subAgents ?? subAgentsOf(agent);
  if (subAgents) registerSubAgentTools(server, subAgents.agents, subAgents.run, options.log);
  return server;
}

/** The agent's own sub-agents (`agents`, from the config's `"agents"`), each run on its own as a top-level run. */
function subAgentsOf(agent: AnyAgent): AgentMcpServerOptions["subAgents"] {
  const configured = agent.options.agents;
  if (!configured || Object.keys(configured).length === 0) return undefined;
  return {
    agents: Object.entries(configured).map(([name, sub]) => ({
      name,
      description: sub.options.description ?? `The sub-agent ${name}.`,
    })),
    run(name, task, { signal, onApproval }) {
      const sub = configured[name] as AnyAgent;
      const asking = onApproval && !sub.options.onApproval ? new Agent({ ...sub.options, onApproval }) : sub;
      return asking.stream(task, { signal });
    },
  };
}

/**
 * Registers one tool per sub-agent, named after it, taking `task` (SPEC section 14): the result is
 * the sub-agent's output, with progress, cancellation and approvals as for `run_agent`.
 * @throws AgentloopError("config") for a name that is not a valid tool name or is taken.
 */
export function registerSubAgentTools(
  server: McpServer,
  agents: readonly SubAgentInfo[],
  run: RunSubAgent,
  log: (line: string) => void,
): void {
  const taken = new Set([RUN_AGENT]);
  for (const { name, description } of agents) {
    if (!/^[a-zA-Z0-9_-]{1,64}$/.test(name) || taken.has(name)) {
      throw new AgentloopError(
        "config",
        `Sub-agent '${name}' cannot be an MCP tool: ${taken.has(name) ? "the name is taken" : "use 1 to 64 of a-z A-Z 0-9 _ -"}; rename it.`,
      );
    }
    taken.add(name);
    server.registerTool(
      name,
      {
        description,
        inputSchema: { task: z.string().describe("What the agent should do, in plain words.") },
      },
      async ({ task }, extra) => {
        try {
          const onApproval = elicitingApprover(server, extra);
          const handle = run(name, task, { signal: extra.signal, ...(onApproval && { onApproval }) });
          return (await runCall(handle, extra, undefined)).tool;
        } catch (error) {
          return failure(error, log);
        }
      },
    );
  }
}

/** One `run_agent` call: a run on its own, or the next step of its session. */
async function runAgentCall(
  server: McpServer,
  options: AgentMcpServerOptions,
  task: string,
  sessionId: string | undefined,
  extra: CallExtra,
): Promise<CallToolResult> {
  if (task.trim() === "") return errorResult("The task is empty: say what the agent should do.");
  const eliciting = elicitingApprover(server, extra);
  // --yes wins: the agent approves by itself. Else the client's user decides, when it can be asked.
  const agent =
    eliciting && !options.agent.options.onApproval
      ? new Agent({ ...options.agent.options, onApproval: eliciting })
      : options.agent;
  const canDecide = agent.options.onApproval !== undefined;
  const signal = extra.signal;
  if (sessionId === undefined) {
    const plan = planRun(undefined, { prompt: task, canDecide });
    return (await runCall(startPlan(agent, plan, { signal }), extra, undefined)).tool;
  }
  checkSessionId(sessionId, "session: invalid id");
  const fresh: SessionRequest = { prompt: task, canDecide };
  const held = await options.sessions
    .hold(sessionId, (s) => planRun(s, fresh))
    .catch((error: unknown) => {
      if (!(error instanceof StoreError) || error.code !== "session_busy")
        throw storeFailure(error, sessionId);
      throw new AgentloopError(
        "config",
        `Session '${sessionId}' is in use by another call: wait for its answer, or use another session.`,
      );
    });
  const controller = new AbortController();
  const both = AbortSignal.any([signal, controller.signal]);
  try {
    stopWhenLost(held, () => controller.abort());
    const { session } = held;
    const last = session.lastRun;
    const word = task.trim().toLowerCase();
    const waiting = last?.status === "awaiting_approval";
    if (last?.status === "awaiting_approval" && word !== "approve" && word !== "deny" && !canDecide) {
      const calls = pendingApprovals(last);
      return errorResult(
        `Session '${sessionId}' waits for approval of ${calls.map((c) => `${c.id} (${c.name})`).join(", ")}: call run_agent with this session and the task "approve" or "deny" first, then send your task.`,
      );
    }
    if (last?.status === "running" && word !== "resume") {
      return errorResult(
        `Session '${sessionId}' has an interrupted run (the process running it stopped): call run_agent with this session and the task "resume" to continue it, or use another session.`,
      );
    }
    // The words that continue a run rather than start one: on a waiting run, `approve` or `deny`
    // (all its calls); on an interrupted one (its process died), `resume`.
    const request: SessionRequest =
      waiting && word === "approve"
        ? { approve: ["all"], canDecide }
        : waiting && word === "deny"
          ? { deny: ["all"], canDecide }
          : last?.status === "running" && word === "resume"
            ? { resume: true, canDecide }
            : fresh;
    const plan: Plan = planRun(session, request);
    const allowedTools = session.lastRun?.allowedTools ?? [];
    const start = { signal: both, session, allowedTools };
    let { result, tool } = await runCall(
      startPlan(agent, plan, { ...start, history: session.messages }),
      extra,
      sessionId,
    );
    if (plan.type === "decide" && plan.thenPrompt !== undefined && result.state.status === "completed") {
      const next = { type: "new" as const, prompt: plan.thenPrompt };
      ({ result, tool } = await runCall(
        startPlan(agent, next, { ...start, history: result.messages }),
        extra,
        sessionId,
      ));
    }
    if (session.lost?.aborted) throw sessionLost(sessionId);
    return tool;
  } catch (error) {
    throw storeFailure(error, sessionId, held);
  } finally {
    await held.close();
  }
}

/** A call that failed before or around its run: the reason as an error result (unexpected ones logged too). */
function failure(error: unknown, log: (line: string) => void): CallToolResult {
  if (error instanceof AgentloopError || error instanceof StoreError) return errorResult(error.message);
  log(`run_agent failed: ${errorMessage(error)}`);
  return errorResult(`The run failed: ${errorMessage(error)}`);
}

/** The tool's description: what the agent is, so the calling model knows when to hand it a task. */
function describeAgent(agent: AnyAgent): string {
  const names = agent.tools.map((t) => t.name);
  const shown =
    names.length > 12 ? `${names.slice(0, 12).join(", ")} and ${names.length - 12} more` : names.join(", ");
  const tools = names.length === 0 ? "no tools" : `the tools ${shown}`;
  return `Runs an agent (model ${agent.options.model.id}, with ${tools}) on a task: it works in a loop, calling its tools, until the task is done, and returns its answer. Pass a session to keep the conversation and continue it in a later call.`;
}
