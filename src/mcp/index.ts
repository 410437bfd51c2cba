export { runningChildPids } from "./children.js";
export type {
  ConnectMcpOptions,
  McpPromptInfo,
  McpServerStatus,
  McpToolSource,
  McpToolset,
} from "./client.js";
export { connectMcpServers } from "./client.js";
export type {
  McpHttpServerConfig,
  McpOAuthConfig,
  McpServerConfig,
  McpServerOptions,
  McpStdioServerConfig,
  McpToolFilter,
  McpTransportKind,
  McpTransportServerConfig,
} from "./config.js";
export type {
  ElicitationContent,
  ElicitationField,
  ElicitationForm,
  ElicitationHandler,
  ElicitationRequest,
  ElicitationResult,
} from "./elicitation.js";
export { formDefaults } from "./elicitation.js";
export { assignToolNames, toolNameFor } from "./names.js";
export { openInBrowser } from "./oauth-browser.js";
export type { McpOAuthRecord, McpTokenStore, TokenStoreErrorCode } from "./oauth-store.js";
export { defaultTokenDirectory, fileTokenStore, memoryTokenStore, TokenStoreError } from "./oauth-store.js";
export type { McpToolResult } from "./result.js";
export { mcpResultToText } from "./result.js";
export type { McpRoot } from "./server-requests.js";
