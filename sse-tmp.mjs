import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
const t = new SSEClientTransport(new URL("http://127.0.0.1:43787/mcp"));
try { await t.start() } catch (e) { console.log(e.constructor.name, e.code, e.message, e.event && Object.keys(e.event), e.event?.error, e.event?.cause); }
