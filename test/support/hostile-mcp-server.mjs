// A stdio MCP server that breaks the protocol, written without the SDK so it can send what the SDK
// would refuse, run as `node hostile-mcp-server.mjs`. Tools: `empty` answers its call with
// `{"jsonrpc":"2.0","id":N}` (neither result nor error); `malformed` with a `result` that is not an
// object; `echo` answers properly, with its `text`.
import { createInterface } from "node:readline";

const send = (message) => process.stdout.write(`${JSON.stringify(message)}\n`);
const tool = (name) => ({ name, inputSchema: { type: "object" } });

for await (const line of createInterface({ input: process.stdin })) {
  const { id, method, params } = JSON.parse(line);
  if (id === undefined) continue; // notifications
  if (method === "initialize") {
    send({
      jsonrpc: "2.0",
      id,
      result: {
        protocolVersion: params.protocolVersion,
        capabilities: { tools: {} },
        serverInfo: { name: "hostile", version: "1.0.0" },
      },
    });
  } else if (method === "tools/list") {
    send({ jsonrpc: "2.0", id, result: { tools: [tool("empty"), tool("malformed"), tool("echo")] } });
  } else if (method === "tools/call" && params.name === "empty") {
    send({ jsonrpc: "2.0", id });
  } else if (method === "tools/call" && params.name === "malformed") {
    send({ jsonrpc: "2.0", id, result: "done" });
  } else if (method === "tools/call") {
    send({
      jsonrpc: "2.0",
      id,
      result: { content: [{ type: "text", text: String(params.arguments?.text) }] },
    });
  } else {
    send({ jsonrpc: "2.0", id, error: { code: -32601, message: `Method not found: ${method}` } });
  }
}
