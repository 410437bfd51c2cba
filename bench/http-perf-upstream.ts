// The upstream of bench/http-perf.ts, in its own process so its CPU is not the client's: the fake
// OpenAI (Chat Completions and Responses) and Anthropic servers of src/testing, each asking for one
// `add` tool call until the request carries N tool results, then answering "done". Prints the
// three base URLs as one JSON line; exits when stdin closes.
import {
  startFakeAnthropicServer,
  startFakeOpenAIServer,
  startFakeResponsesServer,
} from "../dist/testing/index.js";

const n = Number(process.argv[2] ?? 100);
// Turn i asks for add({a: i, b: 2}): arguments vary as a real model's do (no repetition guard trips).
// Tool call ids are per turn: the servers' defaults count requests, so the runs would differ.
const call = (turn: number) => ({ id: `call_${turn}`, name: "add", arguments: { a: turn, b: 2 } });
type Body = { messages?: { role: string; content: unknown }[]; input?: { type?: string }[] };

const answer = (results: number) => (results < n ? { toolCalls: [call(results)] } : { text: "done" });
const answerAnthropic = (results: number) =>
  results < n
    ? { toolCalls: [{ id: `toolu_${results}`, name: "add", input: call(results).arguments }] }
    : { text: "done" };
// The servers record every request; a long benchmark would only grow this process. The slot stays
// (ids such as `chatcmpl-fake-<index>` count requests, and LangGraph merges messages by id).
const forget = (requests: unknown[]) => {
  requests[requests.length - 1] = null;
};

const chat = await startFakeOpenAIServer({
  respond: (request) => {
    forget(chat.requests);
    return answer(((request.body as Body).messages ?? []).filter((m) => m.role === "tool").length);
  },
});
const anthropic = await startFakeAnthropicServer({
  respond: (request) => {
    forget(anthropic.requests);
    const blocks = ((request.body as Body).messages ?? []).flatMap((m) =>
      Array.isArray(m.content) ? (m.content as { type?: string }[]) : [],
    );
    return answerAnthropic(blocks.filter((b) => b.type === "tool_result").length);
  },
});
const responses = await startFakeResponsesServer({
  respond: (request) => {
    forget(responses.requests);
    const input = (request.body as Body).input ?? [];
    return answer(input.filter((i) => i.type === "function_call_output").length);
  },
});

process.stdout.write(
  `${JSON.stringify({ chat: chat.url, anthropic: anthropic.url, responses: responses.url })}\n`,
);
process.stdin.resume();
process.stdin.on("end", () => process.exit(0));
