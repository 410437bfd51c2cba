export { memoryStore } from "./memory-store.js";
export type { PostgresStoreOptions } from "./postgres-store.js";
export { postgresStore } from "./postgres-store.js";
export type { SqliteStoreOptions } from "./sqlite-store.js";
export { sqliteStore } from "./sqlite-store.js";
export type {
  Checkpoint,
  Json,
  RunRecord,
  RunRecordInput,
  RunRecordStatus,
  SessionHandle,
  SessionStore,
  SessionSummary,
  StoredSession,
  StoreErrorCode,
  TakeOver,
} from "./types.js";
export { SESSION_ID_PATTERN, StoreError } from "./types.js";
