import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { SSEClientTransport, SseError } from "@modelcontextprotocol/sdk/client/sse.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import {
  StreamableHTTPClientTransport,
  StreamableHTTPError,
} from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { ErrorCode, McpError, type Tool as McpTool } from "@modelcontextprotocol/sdk/types.js";
import { errorMessage } from "../core/errors.js";
import { isHttpConfig, isStdioConfig, type McpServerConfig, type McpTransportKind } from "./config.js";

/**
 * Opens a client for one configured server: spawns a stdio child, or tries Streamable HTTP
 * and, on a 4xx answer, the older HTTP+SSE transport (unless `type` forces one). `attach`
 * connects a new client over a transport and must close it when the handshake fails.
 */
export async function openClient(
  config: McpServerConfig,
  attach: (transport: Transport) => Promise<Client>,
  hooks: { onStderr: (text: string) => void },
): Promise<{ client: Client; kind: McpTransportKind; pid?: number }> {
  if (isStdioConfig(config)) {
    const transport = new StdioClientTransport({
      command: config.command,
      args: config.args ?? [],
      ...(config.env && { env: config.env }),
      ...(config.cwd !== undefined && { cwd: config.cwd }),
      stderr: "pipe",
    });
    transport.stderr?.on("data", (chunk: Buffer) => hooks.onStderr(chunk.toString("utf8")));
    const client = await attach(transport);
    return { client, kind: "stdio", ...(transport.pid !== null && { pid: transport.pid }) };
  }
  if (isHttpConfig(config)) {
    const url = new URL(config.url);
    const init = config.headers ? { requestInit: { headers: config.headers } } : {};
    if (config.type === "sse")
      return { client: await attach(new SSEClientTransport(url, init)), kind: "sse" };
    try {
      return { client: await attach(new StreamableHTTPClientTransport(url, init)), kind: "streamable-http" };
    } catch (error) {
      if (config.type === "streamable-http" || !isHttp4xx(error)) throw error;
      try {
        return { client: await attach(new SSEClientTransport(url, init)), kind: "sse" };
      } catch (sseError) {
        throw new Error(`Streamable HTTP: ${errorMessage(error)}; SSE: ${errorMessage(sseError)}`);
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

/** The connection is gone (as opposed to the server answering with an error). */
export function isConnectionLoss(error: unknown): boolean {
  if (error instanceof McpError)
    return error.code === ErrorCode.ConnectionClosed && /Connection closed/.test(error.message);
  if (error instanceof StreamableHTTPError || error instanceof SseError) return true;
  return error instanceof Error && (error.message === "Not connected" || error.message === "fetch failed");
}

function isHttp4xx(error: unknown): boolean {
  return (
    error instanceof StreamableHTTPError && error.code !== undefined && error.code >= 400 && error.code < 500
  );
}

export async function closeClient(client: Client | undefined): Promise<void> {
  if (!client) return;
  const transport = client.transport;
  if (transport instanceof StreamableHTTPClientTransport && transport.sessionId !== undefined) {
    // Ends the server-side session; a server that is gone must not delay the close.
    await Promise.race([transport.terminateSession().catch(() => {}), delay(1000)]);
  }
  await client.close().catch(() => {});
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
