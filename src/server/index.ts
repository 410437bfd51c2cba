export type { AgentServer, ServerOptions } from "./app.js";
export { createApp } from "./app.js";
export type { OpenAIErrorBody } from "./errors.js";
