import type { Agent } from "../agent/agent.js";
import type { Session } from "../agent/session.js";
import type { RunState } from "../agent/state.js";
import type { Message } from "../core/messages.js";

/**
 * `/compact` in chat (SPEC section 13): everything before the latest exchange becomes one summary,
 * stored with the session when there is one. Returns the conversation to go on with (the same
 * one when nothing was compacted); one line says what happened.
 */
export async function compactChat(
  agent: Agent,
  history: Message[],
  chat: { last: RunState | undefined; session: Session | undefined; signal: AbortSignal },
  say: (line: string) => void,
): Promise<Message[]> {
  if (chat.last && chat.last.status !== "completed") {
    say("(the last run has not finished: answer it or /resume it, then /compact)");
    return history;
  }
  const done = await agent.compact(history, { signal: chat.signal });
  if (done.status === "nothing_to_compact") {
    say("Nothing to compact: the conversation has nothing before its latest exchange.");
    return history;
  }
  if (done.status === "failed") {
    say(`(compaction failed: ${done.error}; the conversation is unchanged)`);
    return history;
  }
  await chat.session?.compacted(done.messages);
  say(
    `Compacted ${done.summarizedMessages} messages into one summary (${done.tokensBefore} → ${done.tokensAfter} tokens).`,
  );
  return done.messages;
}
