import type { Usage } from "../core/messages.js";

/** USD per million tokens. `cachedInput` applies to input tokens served from the prompt cache. */
export interface ModelPrice {
  input: number;
  output: number;
  cachedInput?: number;
}

/** Prices by model id; a key matches the id exactly or as a prefix followed by "-" (dated versions). */
export type PriceTable = Record<string, ModelPrice>;

/** List prices of common models (USD per million tokens). Override or extend with the `prices` option. */
export const DEFAULT_PRICES: PriceTable = {
  "gpt-4o-mini": { input: 0.15, output: 0.6, cachedInput: 0.075 },
  "gpt-4o": { input: 2.5, output: 10, cachedInput: 1.25 },
  "gpt-4.1-nano": { input: 0.1, output: 0.4, cachedInput: 0.025 },
  "gpt-4.1-mini": { input: 0.4, output: 1.6, cachedInput: 0.1 },
  "gpt-4.1": { input: 2, output: 8, cachedInput: 0.5 },
  "gpt-5-nano": { input: 0.05, output: 0.4, cachedInput: 0.005 },
  "gpt-5-mini": { input: 0.25, output: 2, cachedInput: 0.025 },
  "gpt-5": { input: 1.25, output: 10, cachedInput: 0.125 },
  "o4-mini": { input: 1.1, output: 4.4, cachedInput: 0.275 },
  o3: { input: 2, output: 8, cachedInput: 0.5 },
  "claude-haiku-4-5": { input: 1, output: 5, cachedInput: 0.1 },
  "claude-sonnet-4-5": { input: 3, output: 15, cachedInput: 0.3 },
  "claude-sonnet-4": { input: 3, output: 15, cachedInput: 0.3 },
  "claude-opus-4-1": { input: 15, output: 75, cachedInput: 1.5 },
};

/** The price of a model: the longest key that is the id or a dash-separated prefix of it. */
export function priceOf(modelId: string, table: PriceTable): ModelPrice | undefined {
  const exact = table[modelId];
  if (exact) return exact;
  let best: string | undefined;
  for (const key of Object.keys(table)) {
    if (modelId.startsWith(`${key}-`) && (best === undefined || key.length > best.length)) best = key;
  }
  return best === undefined ? undefined : table[best];
}

/** The cost in USD of one call's usage. */
export function costOf(usage: Usage, price: ModelPrice): number {
  const cached = Math.min(usage.cachedInputTokens ?? 0, usage.inputTokens);
  const fresh = usage.inputTokens - cached;
  const cachedRate = price.cachedInput ?? price.input;
  return (fresh * price.input + cached * cachedRate + usage.outputTokens * price.output) / 1_000_000;
}
