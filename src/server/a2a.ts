import type { Hono, MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import type { A2aEngine, RpcReply } from "./a2a-engine.js";
import type { ServerEnv } from "./request-log.js";
import type { EndpointDeps } from "./run-request.js";

/**
 * Agent2Agent (SPEC section 14) over HTTP: the public agent card at
 * `/.well-known/agent-card.json`, and the JSON-RPC binding at `POST /a2a` (behind the server's
 * API key, like `/v1`), whose streaming methods answer as Server-Sent Events. The protocol is
 * the official SDK's (a2a-engine.ts), loaded on the first A2A request.
 */

/** Where the JSON-RPC interface is served. */
export const A2A_PATH = "/a2a";

const JSON_TYPE = /^application\/(?:[\w.+-]+\+)?json\s*(?:;|$)/i;

const rpcError = (id: RpcReply["id"], code: number, message: string): RpcReply => ({
  jsonrpc: "2.0",
  id,
  error: { code, message },
});

const encoder = new TextEncoder();
const event = (data: unknown, type?: string) =>
  encoder.encode(`${type ? `event: ${type}\n` : ""}data: ${JSON.stringify(data)}\n\n`);

const KEEP_ALIVE = encoder.encode(": keep-alive\n\n");

/**
 * The responses of a stream as SSE, its first already read (an error before it is a plain JSON-RPC
 * error), with a `: keep-alive` comment every `keepAliveMs` that passes without an event (a long
 * tool call), so proxies keep the connection. The client leaving stops the stream, not the task's
 * run.
 */
function sse(
  first: RpcReply,
  rest: AsyncGenerator<RpcReply, void, undefined>,
  engine: A2aEngine,
  keepAliveMs: number,
) {
  let timer: ReturnType<typeof setInterval> | undefined;
  let quiet = false;
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(event(first));
      // One timer per stream: an event clears `quiet`, a tick without one sends the comment.
      timer = setInterval(() => {
        try {
          if (quiet) controller.enqueue(KEEP_ALIVE);
          quiet = true;
        } catch {
          clearInterval(timer); // the stream has closed
        }
      }, keepAliveMs);
      timer.unref();
    },
    async pull(controller) {
      try {
        const next = await rest.next();
        quiet = false;
        if (next.done) {
          clearInterval(timer);
          controller.close();
        } else controller.enqueue(event(next.value));
      } catch (error) {
        clearInterval(timer);
        controller.enqueue(event({ jsonrpc: "2.0", id: first.id, error: engine.error(error) }, "error"));
        controller.close();
      }
    },
    async cancel() {
      clearInterval(timer);
      await rest.return(undefined);
    },
  });
  return new Response(body, {
    headers: { "content-type": "text/event-stream", "cache-control": "no-cache", "x-accel-buffering": "no" },
  });
}

/**
 * Adds the A2A routes. `guards` run before a JSON-RPC request (the refusal while draining), after a
 * body over `maxBodyBytes` is refused (413, a JSON-RPC error); the app applies the API key to
 * `A2A_PATH` as to `/v1`. `secured`: the card declares the Bearer scheme.
 */
export function mountA2a(
  app: Hono<ServerEnv>,
  deps: EndpointDeps,
  { secured, maxBodyBytes }: { secured: boolean; maxBodyBytes: number },
  ...guards: MiddlewareHandler[]
): void {
  let engine: Promise<A2aEngine> | undefined;
  const load = () => {
    engine ??= import("./a2a-engine.js").then((m) => m.a2aEngine(deps, secured));
    return engine;
  };

  app.get("/.well-known/agent-card.json", async (c) => {
    const card = (await load()).card(new URL(A2A_PATH, c.req.url).href);
    return c.json(card, 200, { "cache-control": "no-cache" });
  });

  const tooLarge = `Request body too large: at most ${maxBodyBytes} bytes.`;
  app.use(
    A2A_PATH,
    bodyLimit({ maxSize: maxBodyBytes, onError: (c) => c.json(rpcError(null, -32600, tooLarge), 413) }),
  );
  for (const guard of guards) app.use(A2A_PATH, guard);
  app.post(A2A_PATH, async (c) => {
    if (!JSON_TYPE.test(c.req.header("content-type") ?? ""))
      return c.json(rpcError(null, -32005, "Send the JSON-RPC request with Content-Type: application/json."));
    let body: unknown;
    try {
      body = JSON.parse(await c.req.text());
    } catch {
      return c.json(
        rpcError(null, -32700, "Parse error: the body is not JSON; send one JSON-RPC 2.0 request."),
      );
    }
    const engine = await load();
    const reply = await engine.call(body, {
      owner: c.get("owner"),
      version: c.req.header("a2a-version"),
    });
    if (!(Symbol.asyncIterator in reply)) return c.json(reply);
    let first: IteratorResult<RpcReply, void>;
    try {
      first = await reply.next();
    } catch (error) {
      const id = (body as { id?: RpcReply["id"] }).id ?? null;
      return c.json({ jsonrpc: "2.0", id, error: engine.error(error) });
    }
    if (first.done) return c.json(rpcError(null, -32603, "The stream ended before its first event."));
    return sse(first.value, reply, engine, deps.keepAliveMs);
  });
}
