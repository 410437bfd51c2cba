// `agentloop-runtime/mcp`: connecting MCP servers, their OAuth token stores and elicitation forms.
// Test and CLI helpers are imported from their modules, not from here.
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
export { openInBrowser } from "./oauth-browser.js";
export type { McpOAuthRecord, McpTokenStore, TokenStoreErrorCode } from "./oauth-store.js";
export { fileTokenStore, memoryTokenStore, TokenStoreError } from "./oauth-store.js";
export type { McpRoot } from "./server-requests.js";
