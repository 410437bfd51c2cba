import { resolve } from "node:path";
import { AgentloopError } from "../core/errors.js";
import type { SessionStore } from "../store/types.js";
import type { Settings } from "./config.js";

/**
 * Opens the session store of the settings (`AGENTLOOP_DB`, config `"db"`, or
 * `.agentloop/agentloop.db` under the working directory), created on first use. Only called when
 * something is to be stored: nothing is opened for a run without `--session`.
 * @throws AgentloopError("config") with the store's one-line reason (corrupt or foreign file,
 * newer schema, unwritable place), naming where the location came from.
 */
export async function openStore(settings: Pick<Settings, "db">): Promise<SessionStore> {
  const { location, from } = settings.db;
  if (/^postgres(ql)?:\/\//i.test(location)) {
    throw new AgentloopError(
      "config",
      `A PostgreSQL store (${from}) is not available in this version: set AGENTLOOP_DB to a SQLite file path.`,
    );
  }
  const { sqliteStore, StoreError } = await import("../store/index.js");
  try {
    return await sqliteStore(resolve(location));
  } catch (error) {
    if (error instanceof StoreError) throw new AgentloopError("config", `${error.message} (${from})`);
    throw error;
  }
}
