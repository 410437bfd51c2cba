import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";

/**
 * A server started as a child process and spoken to over stdin/stdout (the Claude Desktop,
 * Cursor and VS Code shape). The child gets a filtered environment, then `env`: HOME, PATH,
 * SHELL, TERM, USER, LOGNAME, proxies (HTTP_PROXY, HTTPS_PROXY, NO_PROXY, ALL_PROXY, either
 * case), CA bundles (NODE_EXTRA_CA_CERTS, SSL_CERT_FILE, SSL_CERT_DIR, REQUESTS_CA_BUNDLE), npm's
 * registry, cache and proxy settings, XDG_*, LANG, LC_*, TZ, TMPDIR, so `npx -y` works behind a
 * proxy; never API keys, tokens, secrets, AGENTLOOP_*, OPENAI_* or ANTHROPIC_* unless `env` names
 * them. It runs in its own process group, so closing ends everything it started. Its stderr is
 * captured and quoted when it fails.
 */
export interface McpStdioServerConfig {
  type?: "stdio";
  command: string;
  args?: string[];
  /** Added to the inherited environment; wins over it and may name any variable. */
  env?: Record<string, string>;
  /** Working directory of the child; relative paths resolve against `process.cwd()`. */
  cwd?: string;
  /** When true, a failure to start is a warning instead of an error. */
  optional?: boolean;
}

/**
 * A remote server. Without `type` (or with `"http"`), Streamable HTTP is tried first and a 4xx
 * answer falls back to the older HTTP+SSE transport; `"streamable-http"` and `"sse"` force one.
 */
export interface McpHttpServerConfig {
  type?: "http" | "streamable-http" | "sse";
  url: string;
  /** Sent with every request, e.g. `Authorization`. Never logged. */
  headers?: Record<string, string>;
  optional?: boolean;
}

/**
 * Library only: a server reached through a transport you create, e.g. one end of the SDK's
 * `InMemoryTransport.createLinkedPair()`. Called again on every restart.
 */
export interface McpTransportServerConfig {
  transport: () => Transport | Promise<Transport>;
  optional?: boolean;
}

/** One entry of `mcpServers`, as in `agentloop.json` (SPEC section 5). */
export type McpServerConfig = McpStdioServerConfig | McpHttpServerConfig | McpTransportServerConfig;

/** How a server is reached, as reported by `McpToolset.servers()`. */
export type McpTransportKind = "stdio" | "streamable-http" | "sse" | "custom";

export function isStdioConfig(config: McpServerConfig): config is McpStdioServerConfig {
  return "command" in config;
}

export function isHttpConfig(config: McpServerConfig): config is McpHttpServerConfig {
  return "url" in config;
}
