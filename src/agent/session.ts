import type { Message } from "../core/messages.js";
import type { RunState } from "../core/run-state.js";
import type { Json, RunRecordStatus, SessionHandle, SessionStore, TakeOver } from "../store/types.js";
import { checkRunState, historyOfLog } from "./state.js";

/**
 * A session held by this process, as runs use it: its conversation so far, its last run (to
 * continue it), and the `checkpoint` to pass to `agent.stream()` / `agent.resume()`, which
 * appends what is new to the stored log and saves the run, in one transaction each time.
 */
export class Session {
  /** The stored conversation, each reply's tool results in call order. */
  readonly messages: Message[];
  /** The last run's state, when the session has one. */
  readonly lastRun: RunState | undefined;
  /** Messages the log holds, by identity (results may move into call order after they are stored). */
  private readonly stored = new WeakSet<Message>();
  /** Messages before this index never move again: only the last reply's results can. */
  private stable: number;
  /** The summary the history starts with (first or second), if any: another one means a compaction rewrote it. */
  private summary: Message | undefined;

  private constructor(private readonly handle: SessionHandle) {
    // The log keeps every message; the history a run goes on with has each summary in place of what it replaced.
    this.messages = historyOfLog(handle.session.messages);
    for (const message of this.messages) this.stored.add(message);
    this.stable = lastReply(this.messages, 0);
    this.summary = summaryOf(this.messages);
    const last = handle.session.lastRun;
    this.lastRun = last && checkRunState({ ...(last.state as object), messages: this.messages });
  }

  /**
   * Takes the session (creating it) for this process.
   * @throws StoreError (`session_busy` when another live process holds it, ...).
   */
  static async open(store: SessionStore, sessionId: string, options?: TakeOver): Promise<Session> {
    const handle = await store.acquire(sessionId, options);
    try {
      return new Session(handle);
    } catch (error) {
      await handle.release(); // a stored run this version cannot read must not leave the session held
      throw error;
    }
  }

  get id(): string {
    return this.handle.sessionId;
  }

  /** Aborts when the store took the session away (a networked store whose lease ran out); the run must stop. */
  get lost(): AbortSignal | undefined {
    return this.handle.lost;
  }

  /** Saves the run: new messages appended, the run record written, atomically. */
  readonly checkpoint = async (state: RunState): Promise<void> => {
    const fresh: Message[] = [];
    const { messages } = state;
    // A compaction put a new summary at the start: the history was rewritten, look at all of it once.
    const summary = summaryOf(messages);
    if (summary !== this.summary) this.stable = 0;
    for (let i = this.stable; i < messages.length; i++) {
      const message = messages[i] as Message;
      if (this.stored.has(message)) continue;
      fresh.push(message);
    }
    const { messages: _log, ...rest } = state;
    await this.handle.checkpoint({
      ...(fresh.length > 0 && { messages: fresh }),
      run: {
        runId: state.runId,
        status: STATUS[state.status],
        ...(state.stopReason !== undefined && { stopReason: state.stopReason }),
        state: rest as unknown as Json,
      },
    });
    for (const message of fresh) this.stored.add(message);
    this.stable = lastReply(messages, this.stable);
    this.summary = summary;
  };

  /**
   * Stores a conversation `agent.compact()` compacted (no run writes meanwhile): its summary is
   * appended to the log, and the next run goes on from `messages`.
   */
  async compacted(messages: readonly Message[]): Promise<void> {
    const summary = summaryOf(messages);
    if (!summary || this.stored.has(summary)) return;
    await this.handle.checkpoint({ messages: [summary] });
    this.stored.add(summary);
    this.summary = summary;
    this.stable = lastReply(messages, 0);
  }

  /** Gives the session up; idempotent. */
  release(): Promise<void> {
    return this.handle.release();
  }
}

const STATUS: Record<RunState["status"], RunRecordStatus> = {
  running: "running",
  awaiting_approval: "waiting",
  awaiting_answer: "waiting",
  awaiting_tools: "waiting",
  completed: "completed",
};

/** The summary a compacted history starts with (it may follow the latest user message). */
function summaryOf(messages: readonly Message[]): Message | undefined {
  for (let i = 0; i < 2 && i < messages.length; i++) {
    const message = messages[i] as Message;
    if (message.role === "user" && message.compaction) return message;
  }
  return undefined;
}

/** The index of the last assistant message at or after `from` (or `from`): results after it may still move. */
function lastReply(messages: readonly Message[], from: number): number {
  for (let i = messages.length - 1; i > from; i--)
    if ((messages[i] as Message).role === "assistant") return i;
  return from;
}
