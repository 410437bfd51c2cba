import {
  checkSessionId,
  clock,
  decodeMessage,
  encodeCheckpoint,
  filtered,
  handleReleased,
  heldHere,
  runOfOtherSession,
  sessionStatus,
  storeClosed,
} from "./shared.js";
import type {
  Checkpoint,
  RunRecord,
  RunRecordStatus,
  SessionHandle,
  SessionStore,
  SessionSummary,
  StoredSession,
  TakeOver,
} from "./types.js";

interface Session {
  createdAt: number;
  updatedAt: number;
  /** Bumped on every write: orders `list()` when two writes share a timestamp. */
  rev: number;
  /** Messages as JSON text, as the SQLite store keeps them, so both behave alike. */
  messages: string[];
  holder?: symbol;
  lastRunId?: string;
}

interface Run {
  sessionId: string;
  status: RunRecordStatus;
  stopReason: string | null;
  state: string;
  createdAt: number;
  updatedAt: number;
}

/**
 * A store in this process's memory: sessions last as long as the store. Exclusive within the
 * process: a second `acquire` of a held session rejects `session_busy`. For tests, and for
 * servers that keep runs only while they live.
 */
export function memoryStore(): SessionStore {
  const sessions = new Map<string, Session>();
  const runs = new Map<string, Run>();
  let rev = 0;
  let closed = false;

  function open(): void {
    if (closed) throw storeClosed();
  }

  function runRecord(runId: string | undefined): RunRecord | undefined {
    const run = runId === undefined ? undefined : runs.get(runId);
    if (run === undefined || runId === undefined) return undefined;
    return {
      runId,
      sessionId: run.sessionId,
      status: run.status,
      ...(run.stopReason === null ? {} : { stopReason: run.stopReason }),
      state: JSON.parse(run.state),
      createdAt: run.createdAt,
      updatedAt: run.updatedAt,
    };
  }

  function summary(id: string, session: Session, held = session.holder !== undefined): SessionSummary {
    const run = session.lastRunId === undefined ? undefined : runs.get(session.lastRunId);
    return {
      id,
      createdAt: session.createdAt,
      updatedAt: session.updatedAt,
      messageCount: session.messages.length,
      status: sessionStatus(held, run),
      ...(run?.stopReason ? { stopReason: run.stopReason } : {}),
      ...(session.lastRunId === undefined ? {} : { lastRunId: session.lastRunId }),
    };
  }

  function stored(id: string, session: Session, held?: boolean): StoredSession {
    const lastRun = runRecord(session.lastRunId);
    return {
      summary: summary(id, session, held),
      messages: session.messages.map(decodeMessage),
      ...(lastRun ? { lastRun } : {}),
    };
  }

  /** A held session is refused, or taken over when forced. */
  function takeOver(sessionId: string, options: TakeOver | undefined): void {
    if (!options?.force) throw heldHere(sessionId);
    options.onTakeOver?.("this process");
  }

  return {
    async acquire(sessionId, options) {
      open();
      checkSessionId(sessionId);
      const now = clock();
      let session = sessions.get(sessionId);
      if (session?.holder !== undefined) takeOver(sessionId, options);
      if (session === undefined) {
        session = { createdAt: now, updatedAt: now, rev: ++rev, messages: [] };
        sessions.set(sessionId, session);
      }
      const found = stored(sessionId, session, false);
      const token = Symbol(sessionId);
      session.holder = token;
      const held = session;
      const holds = () => !closed && held.holder === token && sessions.get(sessionId) === held;
      const handle: SessionHandle = {
        sessionId,
        session: found,
        async checkpoint(checkpoint: Checkpoint) {
          if (!holds()) throw closed ? storeClosed() : handleReleased(sessionId);
          const encoded = encodeCheckpoint(checkpoint);
          if (encoded.messages.length === 0 && encoded.run === undefined) return;
          const run = encoded.run;
          const existing = run && runs.get(run.runId);
          if (run && existing && existing.sessionId !== sessionId)
            throw runOfOtherSession(run.runId, existing.sessionId);
          const at = clock();
          held.messages.push(...encoded.messages);
          if (run) {
            const { runId, ...fields } = run;
            runs.set(runId, { ...fields, sessionId, createdAt: existing?.createdAt ?? at, updatedAt: at });
            held.lastRunId = runId;
          }
          held.updatedAt = at;
          held.rev = ++rev;
        },
        async release() {
          if (held.holder === token) held.holder = undefined;
        },
      };
      return handle;
    },

    async read(sessionId) {
      open();
      checkSessionId(sessionId);
      const session = sessions.get(sessionId);
      return session && stored(sessionId, session);
    },

    async list(filter) {
      open();
      const all = [...sessions]
        .sort(([, a], [, b]) => b.updatedAt - a.updatedAt || b.rev - a.rev)
        .map(([id, session]) => summary(id, session));
      return filtered(all, filter);
    },

    async ping() {
      open();
    },

    async sessionOfRun(runId) {
      open();
      return runs.get(runId)?.sessionId;
    },

    async remove(sessionId, options) {
      open();
      checkSessionId(sessionId);
      const session = sessions.get(sessionId);
      if (session === undefined) return false;
      if (session.holder !== undefined) takeOver(sessionId, options);
      sessions.delete(sessionId);
      for (const [runId, run] of runs) if (run.sessionId === sessionId) runs.delete(runId);
      return true;
    },

    async close() {
      if (closed) return;
      closed = true;
      for (const session of sessions.values()) session.holder = undefined;
    },
  };
}
