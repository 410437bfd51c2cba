/**
 * The defaults of the agent's options (see `AgentOptions`). A leaf module: the CLI reads them
 * without loading the loop.
 */
export const DEFAULTS = {
  maxIterations: 10,
  toolTimeoutMs: 60_000,
  maxToolResultChars: 32_000,
  toolConcurrency: 8,
  circuitBreakerThreshold: 3,
  repetitionThreshold: 3,
} as const;
