import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll } from "vitest";
import { memoryStore, sqliteStore } from "../src/store/index.js";
import { storeContract } from "./support/store-contract.js";

const dir = mkdtempSync(join(tmpdir(), "agentloop-store-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;

storeContract("in-memory", memoryStore);
storeContract("SQLite", () => sqliteStore(join(dir, `contract-${++files}`, "agentloop.db")));
storeContract("SQLite in memory", () => sqliteStore(":memory:"));
