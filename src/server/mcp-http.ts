// MCP over Streamable HTTP at `/mcp` (SPEC section 14): one MCP session per client that
// initializes, each with its own McpServer and the SDK's Web Standard transport (the one
// StreamableHTTPServerTransport wraps for Node's http), so server-to-client requests
// (elicitation) and cancellations reach the call they belong to.
import { randomUUID } from "node:crypto";
import type { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import type { SessionStore } from "../store/types.js";

/** Who sends a request to `/mcp`: its client (by key, when the server has client keys) and that client's store. */
export interface McpHttpClient {
  /** The client's name (its key's), when the server has client keys. */
  owner?: string | undefined;
  /** Where that client's sessions are stored, when the server stores runs. */
  store?: SessionStore | undefined;
}

export interface McpHttpHandler {
  /** Answers one HTTP request to `/mcp` (POST, GET or DELETE) as the Streamable HTTP transport does. */
  handle(request: Request, client: McpHttpClient): Promise<Response>;
  /** Closes every MCP session: their calls in flight are aborted. Never rejects. */
  close(): Promise<void>;
}

/** MCP sessions kept at once; past it the least recently used is closed. */
const MAX_SESSIONS = 1_000;

interface Live {
  server: McpServer;
  transport: WebStandardStreamableHTTPServerTransport;
  owner: string | undefined;
}

/**
 * Serves `create(client)` (a new McpServer per MCP session) over Streamable HTTP. A session is
 * bound to the client that opened it: another client's requests for it get 404, as an unknown
 * session does.
 */
export function mcpHttpHandler(create: (client: McpHttpClient) => McpServer): McpHttpHandler {
  const sessions = new Map<string, Live>();
  const drop = (id: string) => {
    const live = sessions.get(id);
    sessions.delete(id);
    return live?.server.close().catch(() => {});
  };
  return {
    async handle(request, client) {
      const id = request.headers.get("mcp-session-id");
      if (id !== null) {
        const live = sessions.get(id);
        if (!live || live.owner !== client.owner) return notFound();
        // Most recently used last: the first is the one closed when there are too many.
        sessions.delete(id);
        sessions.set(id, live);
        return live.transport.handleRequest(request);
      }
      const server = create(client);
      const transport = new WebStandardStreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (sid) => {
          sessions.set(sid, { server, transport, owner: client.owner });
          const oldest = sessions.keys().next().value;
          if (sessions.size > MAX_SESSIONS && oldest !== undefined) void drop(oldest);
        },
        onsessionclosed: (sid) => void drop(sid),
      });
      await server.connect(transport);
      const response = await transport.handleRequest(request);
      // Anything but an `initialize` without a session is refused by the transport (400): nothing to keep.
      if (transport.sessionId === undefined) await server.close().catch(() => {});
      return response;
    },
    async close() {
      await Promise.all([...sessions.keys()].map(drop));
    },
  };
}

/** The transport's own answer to an unknown session (JSON-RPC error body, 404), so a client starts a new one. */
function notFound(): Response {
  return Response.json(
    { jsonrpc: "2.0", error: { code: -32001, message: "Session not found" }, id: null },
    { status: 404 },
  );
}
