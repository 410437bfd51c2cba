// The hand-written server baseline of bench/server.ts: what a careful hand-written
// OpenAI-compatible endpoint on the same upstream does, and nothing more. node:http; the request's
// JSON parsed; the loop on the official `openai` client (streamed upstream calls with the same
// tools agentloop sends, tool calls assembled, the arguments validated with zod, the tool run, the
// upstream call aborted when the client goes away); the answer as one `chat.completion` or as SSE
// chunks (the text deltas as they arrive, a finish chunk, `[DONE]`).
//
//   OPENAI_BASE_URL=... OPENAI_API_KEY=... node bench/server-floor.ts
// Prints `serving floor on http://127.0.0.1:<port> (hand-written)` on stderr, then serves until killed.
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import OpenAI from "openai";
import { z } from "zod";
import { builtinTools } from "../dist/tools/builtin/index.js";
import { assistantWithCalls, readChatStream } from "./chat-stream.ts";

const client = new OpenAI({ baseURL: process.env.OPENAI_BASE_URL, apiKey: process.env.OPENAI_API_KEY });
const MODEL = "gpt-4o-mini";
// The same three tool specs `agentloop serve` sends, so both upstream requests are alike.
const tools = builtinTools().map((t) => ({
  type: "function" as const,
  function: { name: t.name, description: t.description, parameters: t.parameters },
}));
const calculatorArgs = z.object({ expression: z.string() });
/** The benchmark's only tool call is `calculator("1 + 2")`: a sum of numbers is all it needs. */
const calculator = (expression: string) =>
  String(expression.split("+").reduce((sum, term) => sum + Number(term), 0));

type Message = OpenAI.Chat.Completions.ChatCompletionMessageParam;

async function answer(
  messages: Message[],
  signal: AbortSignal,
  onText: (text: string) => void,
): Promise<{ content: string; usage: { prompt_tokens: number; completion_tokens: number } }> {
  const usage = { prompt_tokens: 0, completion_tokens: 0 };
  for (;;) {
    const stream = await client.chat.completions.create(
      { model: MODEL, messages, tools, stream: true, stream_options: { include_usage: true } },
      { signal },
    );
    const read = await readChatStream(stream, onText);
    const { content, calls } = read;
    usage.prompt_tokens += read.usage.prompt_tokens;
    usage.completion_tokens += read.usage.completion_tokens;
    if (calls.length === 0) return { content, usage };
    messages.push(assistantWithCalls(content, calls));
    for (const c of calls) {
      let result: string;
      try {
        const args = calculatorArgs.safeParse(JSON.parse(c.arguments));
        result =
          c.name !== "calculator"
            ? `Unknown tool ${c.name}`
            : args.success
              ? calculator(args.data.expression)
              : args.error.message;
      } catch {
        result = "The arguments are not JSON.";
      }
      messages.push({ role: "tool", tool_call_id: c.id, content: result });
    }
  }
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}

let count = 0;
async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
  if (req.method !== "POST" || req.url !== "/v1/chat/completions") {
    res.writeHead(404).end();
    return;
  }
  let body: { messages?: Message[]; stream?: boolean };
  try {
    body = JSON.parse(await readBody(req));
  } catch {
    res.writeHead(400, { "content-type": "application/json" }).end('{"error":{"message":"Bad JSON."}}');
    return;
  }
  const controller = new AbortController();
  res.once("close", () => {
    if (!res.writableFinished) controller.abort();
  });
  const id = `chatcmpl-floor-${++count}`;
  const created = Math.floor(Date.now() / 1000);
  const chunk = (delta: object, finish: string | null = null) =>
    `data: ${JSON.stringify({ id, object: "chat.completion.chunk", created, model: MODEL, choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
  const messages = [...(body.messages ?? [])];
  try {
    if (body.stream) {
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
      res.write(chunk({ role: "assistant", content: "" }));
      await answer(messages, controller.signal, (text) => res.write(chunk({ content: text })));
      res.end(`${chunk({}, "stop")}data: [DONE]\n\n`);
      return;
    }
    const { content, usage } = await answer(messages, controller.signal, () => {});
    res.writeHead(200, { "content-type": "application/json" });
    res.end(
      JSON.stringify({
        id,
        object: "chat.completion",
        created,
        model: MODEL,
        choices: [{ index: 0, message: { role: "assistant", content }, finish_reason: "stop" }],
        usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens },
      }),
    );
  } catch (error) {
    if (res.headersSent) res.end();
    else
      res
        .writeHead(502, { "content-type": "application/json" })
        .end(JSON.stringify({ error: { message: String((error as Error).message) } }));
  }
}

const server = createServer((req, res) => void handle(req, res));
server.listen(0, "127.0.0.1", () => {
  process.stderr.write(
    `serving floor on http://127.0.0.1:${(server.address() as AddressInfo).port} (hand-written)\n`,
  );
});
