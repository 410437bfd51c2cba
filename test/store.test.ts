import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe } from "vitest";
import { memoryStore, postgresStore, sqliteStore } from "../src/store/index.js";
import { type Postgres, skipReason, startPostgres } from "./support/postgres.js";
import { storeContract } from "./support/store-contract.js";

const dir = mkdtempSync(join(tmpdir(), "agentloop-store-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;

storeContract("in-memory", memoryStore);
storeContract("SQLite", () => sqliteStore(join(dir, `contract-${++files}`, "agentloop.db")));
storeContract("SQLite in memory", () => sqliteStore(":memory:"));

describe.skipIf(skipReason !== undefined)(
  `PostgreSQL ${skipReason ? `(skipped: ${skipReason})` : ""}`,
  () => {
    let pg: Postgres;
    beforeAll(async () => {
      pg = await startPostgres();
    }, 60_000);
    afterAll(() => pg?.stop());
    // Each test gets a fresh database, so no test sees another's sessions.
    storeContract("PostgreSQL", async () => postgresStore(await pg.database()));
  },
);
