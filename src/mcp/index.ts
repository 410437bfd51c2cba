export { runningChildPids } from "./children.js";
export type { ConnectMcpOptions, McpServerStatus, McpToolSource, McpToolset } from "./client.js";
export { connectMcpServers } from "./client.js";
export type {
  McpHttpServerConfig,
  McpServerConfig,
  McpStdioServerConfig,
  McpTransportKind,
  McpTransportServerConfig,
} from "./config.js";
export { assignToolNames, toolNameFor } from "./names.js";
export type { McpToolResult } from "./result.js";
export { mcpResultToText } from "./result.js";
