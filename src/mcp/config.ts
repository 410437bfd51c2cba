import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { McpRoot } from "./server-requests.js";

/** What every kind of server entry may add. */
export interface McpServerOptions {
  /** When true, a failure to start is a warning instead of an error. */
  optional?: boolean;
  /**
   * Which of the server's tools are offered, by the names the server gives them (names or globs:
   * `*` any run of characters, `?` one character). Without `allow`, every tool; `deny` wins.
   */
  tools?: McpToolFilter;
  /**
   * Time limit of one call of this server's tools (the `"toolTimeout"` of agentloop.json, in
   * seconds there). Default: the connection's `callTimeoutMs`, else the agent's tool timeout.
   */
  toolTimeoutMs?: number;
  /**
   * Where this server may work, offered through MCP roots (`roots/list`) to a server that asks;
   * wins over `ConnectMcpOptions.roots`. Default: none, and no roots capability is declared, so
   * a server such as the filesystem one keeps to the directories in its arguments.
   */
  roots?: readonly McpRoot[];
}

export interface McpToolFilter {
  allow?: string[];
  deny?: string[];
}

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
export interface McpStdioServerConfig extends McpServerOptions {
  type?: "stdio";
  command: string;
  args?: string[];
  /** Added to the inherited environment; wins over it and may name any variable. */
  env?: Record<string, string>;
  /** Working directory of the child; relative paths resolve against `process.cwd()`. */
  cwd?: string;
}

/**
 * A remote server. Without `type` (or with `"http"`), Streamable HTTP is tried first and a 4xx
 * answer falls back to the older HTTP+SSE transport; `"streamable-http"` and `"sse"` force one.
 */
export interface McpHttpServerConfig extends McpServerOptions {
  type?: "http" | "streamable-http" | "sse";
  url: string;
  /**
   * Sent with every request, e.g. `Authorization`. Never logged. With an `Authorization` header
   * the server gets no OAuth sign-in.
   */
  headers?: Record<string, string>;
  /**
   * OAuth 2.1 settings. Without them (and without an `Authorization` header) a server that asks
   * for a sign-in still gets one, as in Claude Code and VS Code: discovery, then dynamic client
   * registration, PKCE and the scopes the server names.
   */
  oauth?: McpOAuthConfig;
}

/**
 * How agentloop signs in to a remote server (SPEC section 5). Every key is optional.
 */
export interface McpOAuthConfig {
  /**
   * A client registered with the authorization server beforehand. An `https://` URL is a client
   * ID metadata document: used as the client ID where the server supports them, else agentloop
   * registers itself. Default: dynamic client registration.
   */
  clientId?: string;
  /** The registered client's secret (`client_secret_basic` or `_post`, as the server supports). */
  clientSecret?: string;
  /**
   * A PEM private key (RSA, EC or Ed25519) for `private_key_jwt` client authentication. A relative
   * path is read from the working directory (in agentloop.json: from the config file's directory).
   */
  privateKeyFile?: string;
  /**
   * `authorization_code` (default): a person signs in with a browser. `client_credentials`: a
   * machine signs in with `clientId` and `clientSecret` or `privateKeyFile`.
   */
  grant?: "authorization_code" | "client_credentials";
  /**
   * Space-separated scopes, asked for when the server names none (in `WWW-Authenticate` or its
   * resource metadata).
   */
  scope?: string;
}

/**
 * Library only: a server reached through a transport you create, e.g. one end of the SDK's
 * `InMemoryTransport.createLinkedPair()`. Called again on every restart.
 */
export interface McpTransportServerConfig extends McpServerOptions {
  transport: () => Transport | Promise<Transport>;
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

/**
 * The secrets of a server entry, to redact wherever text leaves the process: its header values
 * (and the credential after a scheme such as `Bearer`), the values of its `env` variables whose
 * names say key, token, secret, pass, auth or credential, and its OAuth client secret.
 */
export function configSecrets(config: McpServerConfig): string[] {
  const { env, headers, oauth } = config as {
    env?: Record<string, string>;
    headers?: Record<string, string>;
    oauth?: { clientSecret?: string };
  };
  const secrets: string[] = [];
  for (const value of Object.values(headers ?? {})) {
    secrets.push(value);
    const credential = /^\s*[A-Za-z][\w-]*\s+(\S+)\s*$/.exec(value)?.[1];
    if (credential) secrets.push(credential);
  }
  for (const [name, value] of Object.entries(env ?? {}))
    if (/key|token|secret|pass|auth|credential/i.test(name)) secrets.push(value);
  if (oauth?.clientSecret) secrets.push(oauth.clientSecret);
  return secrets;
}
