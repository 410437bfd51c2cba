// The in-process workload every framework runs (bench/peers.ts, bench/loop-profile.ts), and the
// hand-written floor. A fake model asks for add({"a": i, "b": 2}) on turn i of N (arguments vary,
// as a real model's do, so no repetition guard trips), then answers "done"; the tool adds,
// asynchronously. Streaming, every turn streams one text delta first ("ok" before a tool call,
// "done" as the answer). `probe`, when given, is called as the model is asked for its last
// reply: the heap measurement takes what the run holds then.

import { z } from "zod";

export const schema = z.object({ a: z.number(), b: z.number() });
/** The tool every framework runs. */
export const add = async ({ a, b }: z.infer<typeof schema>): Promise<string> => String(a + b);
/** Turn `turn`'s arguments. */
export const argsOf = (turn: number): string => `{"a":${turn},"b":2}`;

interface Usage {
  inputTokens: number;
  outputTokens: number;
}
export interface Call {
  id: string;
  name: string;
  arguments: string;
}
interface Reply {
  content: string;
  toolCalls: Call[];
  finishReason: string;
  usage: Usage;
}
type ModelEvent = { type: "text_delta"; text: string } | { type: "done"; message: Reply };

/** A model as agentloop's `Model` interface has it (an async generator of events), which the floor also uses. */
export interface FakeModel {
  id: string;
  /** Called before each run (a model that counts its turns starts again). */
  reset(): void;
  stream(request: { messages: readonly { role: string }[] }, options?: unknown): AsyncGenerator<ModelEvent>;
}

/** The workload's model behind agentloop's interface: what agentloop and the floor both call. */
export function fakeModel(n: number, streaming: boolean, probe?: () => void): FakeModel {
  let calls = 0;
  const usage = { inputTokens: 1, outputTokens: 1 };
  return {
    id: "fake",
    reset: () => {
      calls = 0;
    },
    async *stream() {
      const turn = calls++;
      if (turn === n) probe?.();
      const content = streaming ? (turn < n ? "ok" : "done") : turn < n ? "" : "done";
      if (streaming) yield { type: "text_delta", text: content };
      yield turn < n
        ? {
            type: "done",
            message: {
              content,
              toolCalls: [{ id: `c${turn}`, name: "add", arguments: argsOf(turn) }],
              finishReason: "tool_calls",
              usage,
            },
          }
        : { type: "done", message: { content, toolCalls: [], finishReason: "stop", usage } };
    },
  };
}

type Message =
  | { role: "user"; content: string }
  | { role: "assistant"; content: string; toolCalls?: Call[] }
  | { role: "tool"; toolCallId: string; name: string; content: string; isError: boolean };
type FloorEvent =
  | { type: "message_delta"; text: string }
  | { type: "tool_result"; id: string; content: string; isError: boolean };

/**
 * The floor: a careful hand-written loop on the same model. It consumes the model's stream, keeps
 * the history, parses each call's arguments and validates them with the tool's zod schema (an
 * unknown tool or bad arguments become an error result the model sees), awaits the tool.
 * Streaming, the loop is an async generator handing the text deltas and tool results to its
 * caller; otherwise a plain async function. No guards, timeouts, budgets, pruning or abort.
 */
export function floor(model: FakeModel, streaming: boolean): () => Promise<Message[]> {
  const tools = new Map([["add", { schema, execute: add }]]);
  async function* loop(): AsyncGenerator<FloorEvent, Message[]> {
    const messages: Message[] = [{ role: "user", content: "go" }];
    const request = { system: "", messages, tools: [] };
    for (;;) {
      let reply: Reply | undefined;
      for await (const event of model.stream(request)) {
        if (event.type === "text_delta") yield { type: "message_delta", text: event.text };
        else reply = event.message;
      }
      if (!reply) throw new Error("no reply");
      const { content, toolCalls } = reply;
      messages.push(
        toolCalls.length ? { role: "assistant", content, toolCalls } : { role: "assistant", content },
      );
      if (toolCalls.length === 0) return messages;
      for (const call of toolCalls) {
        const { content, isError } = await callTool(call);
        messages.push({ role: "tool", toolCallId: call.id, name: call.name, content, isError });
        yield { type: "tool_result", id: call.id, content, isError };
      }
    }
  }
  async function callTool(call: Call): Promise<{ content: string; isError: boolean }> {
    const tool = tools.get(call.name);
    let parsed: unknown;
    try {
      parsed = JSON.parse(call.arguments);
    } catch {
      return { content: "The arguments are not JSON.", isError: true };
    }
    if (!tool) return { content: `Unknown tool ${call.name}`, isError: true };
    const checked = tool.schema.safeParse(parsed);
    if (!checked.success) return { content: checked.error.message, isError: true };
    return { content: await tool.execute(checked.data), isError: false };
  }
  async function plain(): Promise<Message[]> {
    const messages: Message[] = [{ role: "user", content: "go" }];
    const request = { system: "", messages, tools: [] };
    for (;;) {
      let reply: Reply | undefined;
      for await (const event of model.stream(request)) if (event.type === "done") reply = event.message;
      if (!reply) throw new Error("no reply");
      const { content, toolCalls } = reply;
      messages.push(
        toolCalls.length ? { role: "assistant", content, toolCalls } : { role: "assistant", content },
      );
      if (toolCalls.length === 0) return messages;
      for (const call of toolCalls) {
        const { content, isError } = await callTool(call);
        messages.push({ role: "tool", toolCallId: call.id, name: call.name, content, isError });
      }
    }
  }
  return async () => {
    model.reset();
    if (!streaming) return plain();
    const events = loop();
    for (;;) {
      const next = await events.next();
      if (next.done) return next.value;
    }
  };
}
