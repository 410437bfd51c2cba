export type { AgentServer, ServerOptions, ShutdownOptions } from "./app.js";
export { createApp } from "./app.js";
export type { OpenAIErrorBody } from "./errors.js";
export type { Chunk, Completion, WireUsage } from "./map-events.js";
export type { Metrics } from "./metrics.js";
export type { ClientKey } from "./owners.js";
export type { ServerEnv } from "./request-log.js";
export type { RunView } from "./run-routes.js";
