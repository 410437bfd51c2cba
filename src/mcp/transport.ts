import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { SSEClientTransport, SseError } from "@modelcontextprotocol/sdk/client/sse.js";
import {
  StreamableHTTPClientTransport,
  StreamableHTTPError,
} from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { Prompt as McpPrompt, Tool as McpTool } from "@modelcontextprotocol/sdk/types.js";
import { isHttpConfig, isStdioConfig, type McpServerConfig, type McpTransportKind } from "./config.js";
import { childEnvironment } from "./env.js";
import { checkedReplies } from "./http-replies.js";
import type { McpOAuthProvider } from "./oauth-provider.js";
import { StdioTransport } from "./stdio.js";

/**
 * Opens a client for one configured server: spawns a stdio child (in its own process group, with
 * the environment of `childEnvironment`), or tries Streamable HTTP and, on a 4xx answer other
 * than 401/403, the older HTTP+SSE transport (unless `type` forces one), signing in with `oauth`
 * when the server asks. `attach` connects a new client over a transport and must close it when the
 * handshake fails.
 */
export async function openClient(
  config: McpServerConfig,
  attach: (transport: Transport) => Promise<Client>,
  hooks: { onStderr: (text: string) => void; oauth?: McpOAuthProvider | undefined },
): Promise<{ client: Client; kind: McpTransportKind }> {
  if (isStdioConfig(config)) {
    const transport = new StdioTransport({
      command: config.command,
      args: config.args ?? [],
      env: childEnvironment(config.env),
      ...(config.cwd !== undefined && { cwd: config.cwd }),
      onStderr: hooks.onStderr,
    });
    return { client: await attach(transport), kind: "stdio" };
  }
  if (isHttpConfig(config)) {
    const url = new URL(config.url);
    const { oauth } = hooks;
    const init = {
      ...(config.headers && { requestInit: { headers: config.headers } }),
      ...(oauth && { authProvider: oauth }),
      fetch: checkedReplies(oauth?.fetch ?? fetch),
    };
    if (config.type === "sse")
      return { client: await attach(new SSEClientTransport(url, init)), kind: "sse" };
    try {
      return { client: await attach(new StreamableHTTPClientTransport(url, init)), kind: "streamable-http" };
    } catch (error) {
      if (config.type === "streamable-http" || !isHttp4xx(error)) throw error;
      try {
        return { client: await attach(new SSEClientTransport(url, init)), kind: "sse" };
      } catch (sseError) {
        // The Streamable HTTP answer says more, unless the SSE endpoint asked for credentials.
        const auth = sseError instanceof SseError && (sseError.code === 401 || sseError.code === 403);
        throw auth ? sseError : error;
      }
    }
  }
  return { client: await attach(await config.transport()), kind: "custom" };
}

/** Every page of `tools/list`, in the server's order. */
export async function listAllTools(client: Client, timeout: number): Promise<McpTool[]> {
  const tools: McpTool[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < 100; page++) {
    const result = await client.listTools(cursor === undefined ? undefined : { cursor }, { timeout });
    tools.push(...result.tools);
    cursor = result.nextCursor;
    if (!cursor) break;
  }
  return tools;
}

/** Every page of `prompts/list`, in the server's order. */
export async function listAllPrompts(client: Client, timeout: number): Promise<McpPrompt[]> {
  const prompts: McpPrompt[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < 100; page++) {
    const result = await client.listPrompts(cursor === undefined ? undefined : { cursor }, { timeout });
    prompts.push(...result.prompts);
    cursor = result.nextCursor;
    if (!cursor) break;
  }
  return prompts;
}

function isHttp4xx(error: unknown): boolean {
  return (
    error instanceof StreamableHTTPError &&
    error.code !== undefined &&
    error.code >= 400 &&
    error.code < 500 &&
    error.code !== 401 &&
    error.code !== 403
  );
}

/**
 * Closes a client and its transport, even one the client already let go of after a loss (a
 * stdio transport then still ends what is left of the child's process tree).
 */
export async function closeClient(
  client: Client | undefined,
  transport: Transport | undefined,
): Promise<void> {
  if (transport instanceof StreamableHTTPClientTransport && transport.sessionId !== undefined) {
    // Ends the server-side session; a server that is gone must not delay the close.
    await Promise.race([transport.terminateSession().catch(() => {}), delay(1000)]);
  }
  await client?.close().catch(() => {});
  if (transport instanceof StdioTransport) await transport.close();
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
