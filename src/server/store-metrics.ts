import type { SessionStore } from "../store/types.js";
import type { Metrics } from "./metrics.js";

/**
 * The store as the server uses it, measured: each checkpoint's latency (or failure), the
 * sessions held by this server and those it lost (taken over by another) go to `metrics`. Costs two clock reads per checkpoint.
 */
export function measuredStore(store: SessionStore, metrics: Metrics): SessionStore {
  return {
    list: (filter) => store.list(filter),
    read: (id) => store.read(id),
    sessionOfRun: (runId) => store.sessionOfRun(runId),
    remove: (id) => store.remove(id),
    ping: () => store.ping(),
    close: () => store.close(),
    async acquire(sessionId) {
      const handle = await store.acquire(sessionId);
      metrics.lease(1);
      handle.lost?.addEventListener("abort", () => metrics.leaseLost(), { once: true });
      let held = true;
      return {
        sessionId: handle.sessionId,
        session: handle.session,
        ...(handle.lost && { lost: handle.lost }),
        async checkpoint(checkpoint) {
          const start = performance.now();
          try {
            await handle.checkpoint(checkpoint);
          } catch (error) {
            metrics.checkpoint(0, false);
            throw error;
          }
          metrics.checkpoint((performance.now() - start) / 1000, true);
        },
        release() {
          if (held) metrics.lease(-1);
          held = false;
          return handle.release();
        },
      };
    },
  };
}

/** How long `/healthz` and `/metrics` wait for the store to answer before calling it down. */
const PING_LIMIT_MS = 2_000;

/** Pings the store within a limit: its round trip in seconds, or the reason it is down. */
export async function pingStore(store: SessionStore): Promise<{ seconds: number } | { error: string }> {
  const start = performance.now();
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${PING_LIMIT_MS} ms`)), PING_LIMIT_MS);
  });
  try {
    await Promise.race([store.ping(), late]);
    return { seconds: (performance.now() - start) / 1000 };
  } catch (error) {
    return { error: error instanceof Error ? error.message : String(error) };
  } finally {
    clearTimeout(timer);
  }
}
