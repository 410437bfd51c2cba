// How the hand-written floors (bench/http-perf.ts, bench/server-floor.ts) read a Chat Completions
// stream, as a careful loop on the official client does: the text, the tool calls assembled by
// index, the usage; and the assistant message that goes back with the calls.

export interface ChatCall {
  id: string;
  name: string;
  arguments: string;
}

interface Chunk {
  usage?: { prompt_tokens: number; completion_tokens: number } | null;
  choices: {
    delta?: {
      content?: string | null;
      tool_calls?: { index: number; id?: string; function?: { name?: string; arguments?: string } }[];
    };
  }[];
}

/** Reads a stream to its end; `onText` gets each text delta as it arrives. */
export async function readChatStream(
  stream: AsyncIterable<Chunk>,
  onText?: (text: string) => void,
): Promise<{
  content: string;
  calls: ChatCall[];
  usage: { prompt_tokens: number; completion_tokens: number };
}> {
  let content = "";
  const calls: ChatCall[] = [];
  const usage = { prompt_tokens: 0, completion_tokens: 0 };
  for await (const chunk of stream) {
    if (chunk.usage) {
      usage.prompt_tokens += chunk.usage.prompt_tokens;
      usage.completion_tokens += chunk.usage.completion_tokens;
    }
    const delta = chunk.choices[0]?.delta;
    if (!delta) continue;
    if (delta.content) {
      content += delta.content;
      onText?.(delta.content);
    }
    for (const tc of delta.tool_calls ?? []) {
      calls[tc.index] ??= { id: "", name: "", arguments: "" };
      const call = calls[tc.index] as ChatCall;
      if (tc.id) call.id = tc.id;
      if (tc.function?.name) call.name += tc.function.name;
      if (tc.function?.arguments) call.arguments += tc.function.arguments;
    }
  }
  return { content, calls, usage };
}

/** The assistant message of a reply with tool calls, in the wire format. */
export function assistantWithCalls(content: string, calls: readonly ChatCall[]) {
  return {
    role: "assistant" as const,
    content: content || null,
    tool_calls: calls.map((c) => ({
      id: c.id,
      type: "function" as const,
      function: { name: c.name, arguments: c.arguments },
    })),
  };
}
