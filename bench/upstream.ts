// The model provider of the server benchmarks (bench/replicas.ts, bench/server.ts), in its own
// process so its work is not the servers': the fake OpenAI server from dist/testing, answering
// each request after `latencyMs` (default 50, a fast real provider's time to a short answer). A
// request whose last message is a tool result gets the answer; any other gets a `calculator`
// call. Prints its base URL, then serves until killed.
//
//   node bench/upstream.ts [latencyMs=50]
import { startFakeOpenAIServer } from "../dist/testing/index.js";

const latencyMs = Number(process.argv[2] ?? 50);
const wait = () => new Promise((resolve) => setTimeout(resolve, latencyMs));

const server = await startFakeOpenAIServer({
  respond: async (request) => {
    if (latencyMs > 0) await wait();
    return request.body.messages?.at(-1)?.role === "tool"
      ? { text: "1 + 2 = 3." }
      : { toolCalls: [{ name: "calculator", arguments: { expression: "1 + 2" } }] };
  },
});
// The fake server records every request for tests; a benchmark does not read them. The slots
// stay: ids such as `chatcmpl-fake-<index>` count requests.
setInterval(() => {
  server.requests.fill(null as never);
}, 1_000);
process.stdout.write(`${server.url}\n`);
