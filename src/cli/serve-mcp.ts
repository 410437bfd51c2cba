// `agentloop serve --mcp`: the agent as an MCP server over Streamable HTTP at `/mcp` (SPEC section
// 14), loaded only with the flag.
import type { AnyAgent } from "../agent/agent.js";
import { type McpHttpHandler, mcpHttpHandler } from "../server/mcp-http.js";
import { agentMcpServer, storeSessions } from "./mcp-agent.js";

/**
 * The `/mcp` handler of `agentloop serve`: each MCP session gets its own server of `agent`; a
 * `run_agent` session is one of the client's sessions in the server's store (`X-Agentloop-Session`
 * names the same ones). `storeOff` says what turned the store off, when it is.
 */
export function serveMcp(
  agent: AnyAgent,
  version: string,
  storeOff: string | undefined,
  log: (line: string) => void,
): McpHttpHandler {
  return mcpHttpHandler(({ store }) => {
    const server = agentMcpServer({
      agent,
      version,
      log,
      sessions: storeSessions(
        async () => store,
        `This server stores no session (${storeOff ?? "no store"}): call run_agent without a session, or serve with a store.`,
      ),
    });
    server.server.onerror = (error) => log(`MCP: ${error.message}`);
    return server;
  });
}
