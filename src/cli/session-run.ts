// `--session` for `run` and `chat`: taking the stored session, deciding what the command does with
// it (a new prompt, an answer, approvals, a resume), and starting that run.
import type { Agent } from "../agent/agent.js";
import type { RunHandle } from "../agent/handle.js";
import { Session } from "../agent/session.js";
import { pendingApprovals, type RunState } from "../agent/state.js";
import { AgentloopError } from "../core/errors.js";
import type { PendingApproval } from "../core/events.js";
import type { ImageInput, Message } from "../core/messages.js";
import { echoed } from "../core/redact.js";
import { SESSION_ID_PATTERN, StoreError, type TakeOver } from "../store/types.js";
import type { Settings } from "./config.js";
import { openStore } from "./store.js";

/** A session held by this command, with its store; `close()` releases both (never rejects). */
export interface HeldSession {
  session: Session;
  close(): Promise<void>;
}

/** `--force`: take the session over, with one line on stderr naming the holder it was taken from. */
export function forcing(id: string, what = "takes it over"): TakeOver {
  return {
    force: true,
    onTakeOver: (holder) =>
      process.stderr.write(
        `agentloop: warning: session '${id}' was held by ${holder}; --force ${what} (if that process still runs, what it writes to the session from now on is refused)\n`,
      ),
  };
}

export const forceWithoutSession = () =>
  new AgentloopError("usage", "--force takes a stored session over: name it with --session <id>.");

/** A session id as the store takes it; a usage error otherwise (nothing is opened). `what` names where it came from. */
export function checkSessionId(id: string, what = "--session: invalid id"): void {
  if (SESSION_ID_PATTERN.test(id)) return;
  throw new AgentloopError(
    "usage",
    `${what} ${JSON.stringify(id.slice(0, 60))}: use 1 to 128 characters of A-Z a-z 0-9 . _ -`,
  );
}

/**
 * Opens the store and takes the session (creating it). `check` sees a session that does not
 * exist yet before it is created, so a command refused for it (`--resume` on a new id) creates nothing.
 * @throws AgentloopError("config") when the store cannot be used or another live process holds the session.
 */
export async function holdSession(
  settings: Pick<Settings, "db">,
  id: string,
  check: (session: Pick<Session, "id" | "lastRun">) => void = () => {},
  force = false,
): Promise<HeldSession> {
  checkSessionId(id);
  const store = await openStore(settings);
  let session: Session;
  try {
    if ((await store.read(id)) === undefined) check({ id, lastRun: undefined });
    session = await Session.open(store, id, force ? forcing(id) : undefined);
  } catch (error) {
    await store.close().catch(() => {});
    throw storeFailure(error, id);
  }
  return {
    session,
    close: async () => {
      await session.release().catch(() => {});
      await store.close().catch(() => {});
    },
  };
}

/**
 * The one line of a run stopped because another process took its session over (this one could
 * not renew its lease in time: it was paused, or cut off from the store).
 */
export function sessionLost(id: string): AgentloopError {
  return new AgentloopError(
    "config",
    `session '${id}' was lost: this process could not renew its lease in time (it was paused, or cut off from the store), so the run stopped here and another process may take it over; agentloop sessions shows where it stands`,
  );
}

/**
 * Stops the command's run at once when the held session is lost (taken over by another process),
 * instead of running tools until its next checkpoint is refused.
 */
export function stopWhenLost(held: HeldSession | undefined, stop: () => void): void {
  const lost = held?.session.lost;
  if (lost?.aborted) stop();
  else lost?.addEventListener("abort", stop, { once: true });
}

/** A StoreError as the one line a person reads; anything else unchanged. `held`: during a run of the session. */
export function storeFailure(error: unknown, id: string, held?: HeldSession): unknown {
  if (held?.session.lost?.aborted) return sessionLost(id);
  if (!(error instanceof StoreError)) return error;
  if (error.code === "session_busy") {
    const who = error.holder ? ` (${error.holder})` : "";
    return new AgentloopError(
      "config",
      `session '${id}' is in use by another agentloop process${who}: wait for it or use another --session; if that process is gone, --force takes the session over`,
    );
  }
  // During a run (the session was held): what was stored before is kept, and the run can go on from it.
  const kept = held
    ? `; what was stored is kept: agentloop run --session ${id} --resume continues the run once the store is back`
    : "";
  return new AgentloopError("config", `${error.message}${kept}`);
}

/** What a command asks of a session: a prompt (or answer), and/or a way to continue its run. */
export interface SessionRequest {
  prompt?: string | undefined;
  resume?: boolean | undefined;
  approve?: readonly string[] | undefined;
  deny?: readonly string[] | undefined;
  /** Calls can be decided as the run goes (a terminal, or `--yes`). */
  canDecide: boolean;
}

/** What to run: a new run, or the session's last run continued. */
export type Plan =
  | { type: "new"; prompt: string }
  | { type: "resume"; state: RunState }
  | { type: "answer"; state: RunState; answer: string }
  /** Continues a run waiting for approvals; `thenPrompt` is a prompt to send once it has completed. */
  | { type: "decide"; state: RunState; approve: string[]; deny: string[]; thenPrompt?: string };

const usage = (message: string) => new AgentloopError("usage", message);

/**
 * Decides what a command does with the session's last run.
 * @throws AgentloopError("usage") with one line naming the flag that fits (`--resume`, `--approve`, ...).
 */
export function planRun(session: Pick<Session, "id" | "lastRun"> | undefined, request: SessionRequest): Plan {
  const prompt = request.prompt?.trim() ? request.prompt : undefined;
  const deciding = request.approve !== undefined || request.deny !== undefined;
  if (!session) {
    if (request.resume || deciding) {
      const flag = request.resume ? "--resume" : request.approve ? "--approve" : "--deny";
      throw usage(`${flag} continues a stored run: name its session with --session <id>.`);
    }
    if (!prompt) throw missingPrompt();
    return { type: "new", prompt };
  }
  const id = session.id;
  const last = session.lastRun;
  if (request.resume) {
    if (deciding)
      throw usage(
        "--resume continues an interrupted run; --approve and --deny a waiting one: use one of them.",
      );
    if (prompt)
      throw usage(
        `--resume continues the interrupted run as it was: drop the prompt and send it once the run has completed.`,
      );
    if (last?.status === "running") return { type: "resume", state: last };
    throw usage(`nothing to resume: ${whereItStands(id, last)}`);
  }
  if (deciding) {
    if (prompt)
      throw usage(
        `--approve and --deny continue the waiting run: drop the prompt and send it once the run has completed.`,
      );
    if (last?.status !== "awaiting_approval")
      throw usage(`nothing waits for approval: ${whereItStands(id, last)}`);
    return { type: "decide", state: last, ...decisions(id, last, request.approve ?? [], request.deny ?? []) };
  }
  switch (last?.status) {
    case "running":
      throw usage(
        `the last run of session '${id}' was interrupted: continue it with agentloop run --session ${id} --resume (or use another --session)`,
      );
    case "awaiting_answer":
      if (!prompt)
        throw usage(
          `session '${id}' waits for an answer to ${question(last)}: agentloop run --session ${id} "<answer>"`,
        );
      return { type: "answer", state: last, answer: prompt };
    case "awaiting_approval":
      if (!request.canDecide) throw usage(`${whereItStands(id, last)}, then send your prompt`);
      return { type: "decide", state: last, approve: [], deny: [], ...(prompt && { thenPrompt: prompt }) };
    default:
      if (!prompt) throw missingPrompt();
      return { type: "new", prompt };
  }
}

/** The question a run waits on, on one line and short. */
const question = (state: RunState) => {
  const flat = state.output.replace(/\s+/g, " ").trim();
  return JSON.stringify(flat.length > 100 ? `${flat.slice(0, 99)}…` : flat);
};

const missingPrompt = () =>
  new AgentloopError("usage", 'Missing prompt: agentloop run "your task" (or pipe it on stdin).');

/** The calls a waiting run waits on, in call order (a waiting sub-agent's included). */
function waitingCalls(state: RunState): PendingApproval[] {
  return state.status === "awaiting_approval" ? pendingApprovals(state) : [];
}

/** Where the session's last run stands, and the command that continues it. */
function whereItStands(id: string, last: RunState | undefined): string {
  if (!last)
    return `session '${id}' has no run yet: send it a prompt with agentloop run --session ${id} "<prompt>"`;
  switch (last.status) {
    case "completed":
      return `the last run of session '${id}' completed (${last.stopReason}): send a new prompt with agentloop run --session ${id} "<prompt>"`;
    case "awaiting_answer":
      return `session '${id}' waits for an answer to ${question(last)}: agentloop run --session ${id} "<answer>"`;
    case "awaiting_approval": {
      const calls = waitingCalls(last)
        .map((c) => `${c.id} (${c.name})`)
        .join(", ");
      return `session '${id}' waits for approval of ${calls}: decide with agentloop run --session ${id} --approve <ids>|all or --deny <ids>|all`;
    }
    case "awaiting_tools":
      return `the last run of session '${id}' waits for the results of its server client's own tools (only that client sends them): send a new prompt with agentloop run --session ${id} "<prompt>"`;
    default:
      return `the last run of session '${id}' was interrupted: continue it with agentloop run --session ${id} --resume`;
  }
}

/** `--approve` / `--deny` lists (ids or `all`) as the decisions on the waiting calls; explicit ids win over `all`. */
function decisions(
  id: string,
  state: RunState,
  approve: readonly string[],
  deny: readonly string[],
): { approve: string[]; deny: string[] } {
  const waiting = waitingCalls(state);
  const ids = waiting.map((call) => call.id);
  const named = (list: readonly string[]) => list.filter((x) => x !== "all");
  for (const [flag, list] of [
    ["--approve", approve],
    ["--deny", deny],
  ] as const) {
    const unknown = named(list).find((x) => !ids.includes(x));
    if (unknown !== undefined) {
      const calls = waiting.map((c) => `${c.id} (${c.name})`).join(", ");
      throw usage(
        `${flag}: no call '${echoed(unknown)}' waits for approval in session '${id}'; waiting: ${calls} (or all)`,
      );
    }
  }
  const both = named(approve).find((x) => named(deny).includes(x));
  if (both !== undefined) throw usage(`call '${echoed(both)}' is both approved and denied: name it once.`);
  if (approve.includes("all") && deny.includes("all"))
    throw usage("--approve all and --deny all contradict each other: name the calls for one of them.");
  const rest = (other: readonly string[]) => ids.filter((x) => !other.includes(x));
  return {
    approve: approve.includes("all") ? rest(named(deny)) : named(approve),
    deny: deny.includes("all") ? rest(named(approve)) : named(deny),
  };
}

/** How every run of a command starts: its signal, and the session's checkpoint when it has one. */
export interface StartOptions {
  signal: AbortSignal;
  session?: Session | undefined;
  /** The conversation a new run follows (the session's, or a chat's so far). */
  history?: readonly Message[];
  /** Tools a person allowed for the session ("a" at the prompt). */
  allowedTools?: readonly string[];
  /** Images sent with a new prompt (`--image`). */
  images?: readonly ImageInput[];
}

/**
 * Starts what `plan` says (a `decide` plan's `thenPrompt` is left to the caller). A run continued
 * with another model than it was started with goes on (the person asked for it here), with a note.
 */
export function startPlan(agent: Agent, plan: Plan, options: StartOptions): RunHandle {
  const { signal, session } = options;
  const was = plan.type === "new" ? undefined : plan.state.model;
  const now = agent.options.model.id;
  if (was !== undefined && was !== now && plan.type !== "new")
    process.stderr.write(
      `agentloop: note: run ${plan.state.runId} was started with model ${was}; it goes on with ${now} (pass --model ${was} to keep it)\n`,
    );
  const stored = session ? { checkpoint: session.checkpoint } : {};
  switch (plan.type) {
    case "new":
      return agent.stream(
        options.images?.length ? [{ type: "text", text: plan.prompt }, ...options.images] : plan.prompt,
        {
          signal,
          ...stored,
          ...(session && { sessionId: session.id }),
          ...(options.history && { history: options.history }),
          ...(options.allowedTools && { allowedTools: options.allowedTools }),
        },
      );
    case "resume":
      return agent.resume(plan.state, { signal, ...stored });
    case "answer":
      return agent.resume(plan.state, { signal, ...stored, answer: plan.answer });
    case "decide":
      return agent.resume(plan.state, { signal, ...stored, approve: plan.approve, deny: plan.deny });
  }
}
