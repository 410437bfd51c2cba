import {
  SESSION_ID_PATTERN,
  type SessionHandle,
  type SessionStore,
  type StoredSession,
  StoreError,
} from "../store/types.js";

/**
 * Runs and sessions that belong to the API key that created them. With `keys`, each client has
 * its own key and a name; what a client stores lives under `<name>.<session id>` in the store,
 * so two clients' sessions `x` are two sessions, and a run of another client is not found (404,
 * as a missing one). The store needs no column for it: the owner is in the stored id, which
 * survives restarts and every store alike.
 */

/** A client's own key: `name` owns what it creates; `sha256` is the SHA-256 of the key, in hex (the key itself is never configured). */
export interface ClientKey {
  name: string;
  sha256: string;
}

/** Client names: 1 to 32 of `A-Z a-z 0-9 _ -` (no dot: the dot ends the name in a stored session id). */
const CLIENT_NAME_PATTERN = /^[A-Za-z0-9_-]{1,32}$/;

/** The owner of the single `apiKey` (AGENTLOOP_API_KEY) when `keys` are configured beside it. */
export const DEFAULT_OWNER = "default";

/** Why a list of client keys cannot be used, if it cannot: one line naming the entry. */
export function clientKeysProblem(keys: readonly ClientKey[]): string | undefined {
  const names = new Set<string>();
  const digests = new Set<string>();
  for (const [i, { name, sha256 }] of keys.entries()) {
    if (!CLIENT_NAME_PATTERN.test(name))
      return `keys[${i}].name ${JSON.stringify(name.slice(0, 40))} is not a client name: use 1 to 32 characters of A-Z a-z 0-9 _ -.`;
    if (name === DEFAULT_OWNER)
      return `keys[${i}].name '${DEFAULT_OWNER}' is reserved (it owns the runs of AGENTLOOP_API_KEY): choose another name.`;
    if (names.has(name)) return `keys[${i}].name '${name}' is given twice: each client needs its own name.`;
    if (!/^[0-9a-f]{64}$/i.test(sha256))
      return `keys[${i}].sha256 of '${name}' is not a SHA-256 in hex (64 characters): compute it with printf %s "$KEY" | sha256sum.`;
    if (digests.has(sha256.toLowerCase()))
      return `keys[${i}] ('${name}') has the key of another entry: each client needs its own key.`;
    names.add(name);
    digests.add(sha256.toLowerCase());
  }
  return undefined;
}

/**
 * The store as one client sees it: its own sessions only, by the ids it gave them. Without an
 * owner (a server with one key or none), the store itself.
 */
export function ownedStore(store: SessionStore, owner: string | undefined): SessionStore {
  if (owner === undefined) return store;
  const prefix = `${owner}.`;
  const stored = (id: string) => prefix + id;
  const mine = (id: string | undefined) => (id?.startsWith(prefix) ? id.slice(prefix.length) : undefined);
  return {
    async acquire(sessionId) {
      if (SESSION_ID_PATTERN.test(sessionId) && !SESSION_ID_PATTERN.test(stored(sessionId)))
        throw new StoreError(
          "invalid_session_id",
          `session id too long for client '${owner}': use at most ${128 - prefix.length} characters`,
        );
      return ownHandle(await store.acquire(stored(sessionId)), sessionId);
    },
    async read(sessionId) {
      const session = await store.read(stored(sessionId));
      return session && ownSession(session, sessionId);
    },
    async list(filter = {}) {
      const { limit, ...rest } = filter;
      const own = (await store.list(rest)).flatMap((summary) => {
        const id = mine(summary.id);
        return id === undefined ? [] : [{ ...summary, id }];
      });
      return limit === undefined ? own : own.slice(0, limit);
    },
    sessionOfRun: async (runId) => mine(await store.sessionOfRun(runId)),
    remove: (sessionId) => store.remove(stored(sessionId)),
    ping: () => store.ping(),
    // The app's store, closed by whoever opened it, not by one client's view.
    close: () => Promise.resolve(),
  };
}

/** A stored session under the id its client gave it. */
function ownSession(session: StoredSession, sessionId: string): StoredSession {
  return {
    ...session,
    summary: { ...session.summary, id: sessionId },
    ...(session.lastRun && { lastRun: { ...session.lastRun, sessionId } }),
  };
}

/** A held session under the id its client gave it. */
function ownHandle(handle: SessionHandle, sessionId: string): SessionHandle {
  return {
    sessionId,
    session: ownSession(handle.session, sessionId),
    ...(handle.lost && { lost: handle.lost }),
    checkpoint: (checkpoint) => handle.checkpoint(checkpoint),
    release: () => handle.release(),
  };
}
