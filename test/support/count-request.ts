import { countSystem, countTools, type TokenCounter } from "../../src/memory/tokens.js";
import type { ModelRequest } from "../../src/models/adapter.js";

/**
 * Tokens a whole request costs: system prompt, tool definitions and messages, as the context
 * manager counts them (what its `budget` bounds).
 */
export function countRequest(request: ModelRequest, counter: TokenCounter): number {
  let tokens = countSystem(request.system, counter) + countTools(request.tools, counter);
  for (const message of request.messages) tokens += counter.countMessage(message);
  return tokens;
}
