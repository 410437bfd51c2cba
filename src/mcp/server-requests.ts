// The requests a server may send to agentloop, and the capabilities that announce them.
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import {
  type ClientCapabilities,
  ErrorCode,
  ListRootsRequestSchema,
  McpError,
} from "@modelcontextprotocol/sdk/types.js";
import { answerElicitation, type ElicitationHandler } from "./elicitation.js";

/** A directory (or other resource) the servers may work in, as MCP `roots/list` gives it. */
export interface McpRoot {
  /** A `file://` URI. */
  uri: string;
  name?: string;
}

/**
 * Form-mode elicitation, and roots only when some are offered (the list does not change while a
 * server runs): a client that declares none leaves a server where its arguments put it.
 */
export function clientCapabilities(roots: readonly McpRoot[] | undefined): ClientCapabilities {
  return { elicitation: { form: {} }, ...(roots && { roots: {} }) };
}

/**
 * Answers `elicitation/create` on `client`, and `roots/list` when `roots` are offered; anything
 * else is "method not found".
 */
export function answerServerRequests(
  client: Client,
  options: {
    server: string;
    label: string;
    roots: readonly McpRoot[] | undefined;
    onElicitation: ElicitationHandler | undefined;
    warn: (message: string) => void;
  },
): void {
  const { roots } = options;
  if (roots)
    client.setRequestHandler(ListRootsRequestSchema, () => ({ roots: roots.map((root) => ({ ...root })) }));
  // Through the fallback, not setRequestHandler: the SDK's own check of the form would answer a
  // malformed one with a protocol error instead of the clear line and the decline of answerElicitation.
  client.fallbackRequestHandler = async (request, extra) => {
    if (request.method !== "elicitation/create")
      throw new McpError(ErrorCode.MethodNotFound, `Method not found: ${request.method}`);
    return answerElicitation(request, {
      server: options.server,
      label: options.label,
      handler: options.onElicitation,
      warn: options.warn,
      signal: extra.signal,
    });
  };
}
