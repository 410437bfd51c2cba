/**
 * Replies an MCP server sends as events of a Streamable HTTP answer, checked as stdio's lines are
 * (`readMessage`): a reply that is not valid JSON-RPC, e.g. one with neither `result` nor
 * `error`, becomes an error reply, so its request fails at once. The SDK drops such an event
 * (`onerror`) and the request would wait for its timeout while the server keeps the stream open.
 */
import { deserializeMessage } from "@modelcontextprotocol/sdk/shared/stdio.js";
import type { FetchLike } from "@modelcontextprotocol/sdk/shared/transport.js";
import { readMessage } from "./stdio.js";

/** `fetch` whose event-stream answers have their invalid replies replaced (see above); other answers as they come. */
export function checkedReplies(base: FetchLike): FetchLike {
  return async (url, init) => {
    const response = await base(url, init);
    if (!response.body || !response.headers.get("content-type")?.includes("text/event-stream"))
      return response;
    const body = response.body
      .pipeThrough(new TextDecoderStream())
      .pipeThrough(lineChecker())
      .pipeThrough(new TextEncoderStream());
    return new Response(body, {
      status: response.status,
      statusText: response.statusText,
      headers: response.headers,
    });
  };
}

/** Passes whole lines on (a partial line waits for its end, as the SSE parser would), each checked. */
function lineChecker(): TransformStream<string, string> {
  let rest = "";
  return new TransformStream({
    transform(chunk, controller) {
      // Only the new chunk is searched: a long line over many chunks stays linear.
      const end = chunk.lastIndexOf("\n");
      if (end < 0) {
        rest += chunk;
        return;
      }
      const lines = rest + chunk.slice(0, end + 1);
      rest = chunk.slice(end + 1);
      controller.enqueue(checkLines(lines));
    },
    flush(controller) {
      if (rest) controller.enqueue(checkLines(rest));
    },
  });
}

function checkLines(text: string): string {
  if (!text.includes("data:")) return text;
  return text
    .split("\n")
    .map((line) => (line.startsWith("data:") ? checkData(line) : line))
    .join("\n");
}

/** A `data:` line holding one whole reply: as it is when valid, else an error reply; any other line as it is. */
function checkData(line: string): string {
  const cr = line.endsWith("\r") ? "\r" : "";
  const payload = line.slice(line.startsWith("data: ") ? 6 : 5, line.length - cr.length);
  // Only a reply (an id, no method) can be replaced; notifications and fragments pass untouched,
  // and so does a reply with a result and no error (the SDK reads it; no second parse of a large one).
  if (!payload.startsWith("{") || !payload.includes('"id"') || payload.includes('"method"')) return line;
  if (payload.includes('"result"') && !payload.includes('"error"')) return line;
  try {
    deserializeMessage(payload);
    return line;
  } catch {}
  try {
    return `data: ${JSON.stringify(readMessage(payload))}${cr}`;
  } catch {
    return line; // not JSON, or not a reply: the SDK decides, as before
  }
}
