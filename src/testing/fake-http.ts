import { createServer, type IncomingHttpHeaders, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

/**
 * The core both fake model servers share: an HTTP server on 127.0.0.1 (random port) that records
 * every request to the protocol's endpoint and answers it with what the test's responder returns,
 * a scripted reply (written by the protocol) or one of the faults below (written here, with the
 * protocol's events for the partial streams).
 */

export interface FakeRequest {
  method: string;
  path: string;
  /** The query parameters, e.g. `{ "api-version": "2024-10-21" }` (always set by this server). */
  query?: Record<string, string>;
  /** Lower-case header names. */
  headers: IncomingHttpHeaders;
  // biome-ignore lint/suspicious/noExplicitAny: a parsed JSON body of any shape
  body: any;
}

/**
 * The faults every fake server can play. The partial streams start with the protocol's opening
 * (OpenAI: a role chunk; Anthropic: `message_start` and a text block's start), then stream
 * `afterText` in word-sized text deltas.
 */
export type FakeFault =
  /** An HTTP error; the default body is the protocol's error JSON. */
  | { status: number; headers?: Record<string, string>; body?: string }
  /** These bytes as-is (e.g. a recorded fixture); content type SSE unless they start with `{`. */
  | { raw: string; status?: number; headers?: Record<string, string> }
  /** The partial stream, then destroys the socket (no end of the stream). */
  | { breakOff: true; afterText?: string }
  /** The partial stream, then nothing more until the client goes away. */
  | { stall: true; afterText?: string }
  /** The partial stream, then half of the next text delta's event, then destroys the socket. */
  | { cutMidChunk: true; afterText?: string }
  /** Destroys the socket before sending anything (no status line, no headers). */
  | { reset: true };

/** Answers request number `index` (from 0): a function, or a list taken in order. */
export type FakeResponderOf<R> = ((request: FakeRequest, index: number) => R | Promise<R>) | readonly R[];

/** What a fake server adds to the core: its endpoint, its error JSON, its events. */
export interface FakeProtocol<Reply> {
  /** E.g. "Fake OpenAI server": starts the messages of the server's own errors. */
  name: string;
  /**
   * True for a request to the protocol's endpoint, which is recorded and answered by the
   * responder; otherwise answers it itself (another route, or a 404) and returns false.
   */
  route(method: string, path: string, res: ServerResponse): boolean;
  /** The JSON body of the server's own errors (status 500) and of a `{ status }` fault without a body. */
  errorBody(message: string, status: number): unknown;
  /** Extra headers of a `{ status }` fault's answer. */
  faultHeaders?(index: number): Record<string, string>;
  /** The opening events of a fault's partial stream. */
  partialStart(request: FakeRequest, index: number): string;
  /** One text delta event of a fault's partial stream. */
  partialText(text: string, index: number): string;
  /** Writes the answer to a scripted reply. */
  reply(res: ServerResponse, request: FakeRequest, index: number, reply: Reply): void;
}

export interface FakeHttpServer {
  /** E.g. `http://127.0.0.1:54321`. */
  readonly origin: string;
  /** Every request to the protocol's endpoint, in order. */
  readonly requests: FakeRequest[];
  /** Stops listening and drops every open connection (a stalled stream included). */
  close(): Promise<void>;
}

/** About 4 characters a token. */
export const tokens = (text: string): number => Math.max(1, Math.ceil(text.length / 4));

/** Text as small deltas of a word each (leading whitespace kept, like real tokens). */
export const words = (text: string): string[] => text.match(/\s*\S+|\s+$/g) ?? [];

/** Text in pieces of at least 4 characters, about `count` of them. */
export function pieces(text: string, count: number): string[] {
  const size = Math.max(4, Math.ceil(text.length / count));
  const out: string[] = [];
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size));
  return out;
}

export function sendJson(
  res: ServerResponse,
  status: number,
  value: unknown,
  headers: Record<string, string> = {},
) {
  res.writeHead(status, { "content-type": "application/json", ...headers });
  res.end(JSON.stringify(value));
}

function isFault(r: object): r is FakeFault {
  return ["status", "raw", "breakOff", "stall", "cutMidChunk", "reset"].some((key) => key in r);
}

function writeFault<R>(
  protocol: FakeProtocol<R>,
  res: ServerResponse,
  request: FakeRequest,
  index: number,
  r: FakeFault,
) {
  if ("raw" in r) {
    const type = r.raw.trimStart().startsWith("{") ? "application/json" : "text/event-stream";
    res.writeHead(r.status ?? 200, { "content-type": type, ...r.headers });
    res.end(r.raw);
  } else if ("status" in r) {
    const body =
      r.body ?? JSON.stringify(protocol.errorBody(`Fake server error (HTTP ${r.status})`, r.status));
    res.writeHead(r.status, {
      "content-type": "application/json",
      ...protocol.faultHeaders?.(index),
      ...r.headers,
    });
    res.end(body);
  } else if ("reset" in r) {
    res.socket?.destroy();
  } else {
    res.writeHead(200, { "content-type": "text/event-stream" });
    res.write(protocol.partialStart(request, index));
    for (const t of words(r.afterText ?? "")) res.write(protocol.partialText(t, index));
    if ("cutMidChunk" in r) {
      const line = protocol.partialText(" and the rest", index);
      res.write(line.slice(0, Math.floor(line.length / 2)));
    }
    // Destroy only after the events were flushed, so the client sees them before the break.
    if (!("stall" in r)) setTimeout(() => res.socket?.destroy(), 20);
  }
}

/** Starts the server; a responder that throws or runs out of responses gets a 500 the client does not retry. */
export async function startFakeHttpServer<R extends object>(
  respond: FakeResponderOf<R | FakeFault>,
  protocol: FakeProtocol<R>,
): Promise<FakeHttpServer> {
  const requests: FakeRequest[] = [];
  const server = createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on("data", (d: Buffer) => parts.push(d));
    req.on("end", async () => {
      const url = new URL(req.url ?? "/", "http://fake");
      const method = req.method ?? "GET";
      const path = url.pathname;
      if (!protocol.route(method, path, res)) return;
      const text = Buffer.concat(parts).toString("utf8");
      let body: unknown;
      try {
        body = text ? JSON.parse(text) : undefined;
      } catch {
        body = text;
      }
      const query = Object.fromEntries(url.searchParams);
      const request: FakeRequest = { method, path, query, headers: req.headers, body };
      const index = requests.push(request) - 1;
      const noRetry = { "x-should-retry": "false" };
      try {
        const r = typeof respond === "function" ? await respond(request, index) : respond[index];
        if (r === undefined) {
          const count = typeof respond === "function" ? 0 : respond.length;
          const message = `${protocol.name}: no scripted response for request #${index + 1} (only ${count} given)`;
          sendJson(res, 500, protocol.errorBody(message, 500), noRetry);
        } else if (isFault(r)) writeFault(protocol, res, request, index, r);
        else protocol.reply(res, request, index, r);
      } catch (error) {
        const message = `${protocol.name}: respond() threw: ${error instanceof Error ? error.message : String(error)}`;
        sendJson(res, 500, protocol.errorBody(message, 500), noRetry);
      }
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    origin: `http://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
