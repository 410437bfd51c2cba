/** Raw HTTP helpers for the server's tests: POST a JSON body, read an error body, read an SSE body. */
import type OpenAI from "openai";
import type { Message } from "../../src/index.js";

export type Event = { type: string; [field: string]: unknown };
type WithEvent<T> = T & { agentloop?: Event };
export type Completion = WithEvent<OpenAI.Chat.Completions.ChatCompletion>;
export type Chunk = WithEvent<OpenAI.Chat.Completions.ChatCompletionChunk>;
export interface ErrorBody {
  error: { message: string; type: string; code: string | null; param: string | null };
}

export const post = (url: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
export const errorOf = async (res: Response) => ((await res.json()) as ErrorBody).error;

/** The data events of an SSE body: the chunks, and whether it ended with [DONE]. */
export async function sse(res: Response) {
  const text = await res.text();
  const data = [...text.matchAll(/^data: (.*)$/gm)].map((m) => m[1] as string);
  return {
    done: data.at(-1) === "[DONE]",
    chunks: data.filter((d) => d !== "[DONE]").map((d) => JSON.parse(d) as Chunk),
  };
}
export const contentOf = (chunks: Chunk[]) => chunks.map((c) => c.choices[0]?.delta.content ?? "").join("");
export const toolResults = (messages: readonly Message[]) =>
  messages.flatMap((m) => (m.role === "tool" ? [[m.toolCallId, m.content, m.isError]] : []));
