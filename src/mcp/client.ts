import type { Tool as McpTool } from "@modelcontextprotocol/sdk/types.js";
import { AgentloopError, errorMessage } from "../core/errors.js";
import { defineTool, type JsonSchema, type Tool, type ToolContext } from "../tools/tool.js";
import type { McpServerConfig, McpTransportKind } from "./config.js";
import { McpConnection } from "./connection.js";
import { StartFailure } from "./failure.js";
import { assignToolNames } from "./names.js";
import { mcpResultToText } from "./result.js";

export interface ConnectMcpOptions {
  /** Time each server has to start and list its tools. Default 30,000 ms. */
  startupTimeoutMs?: number;
  /**
   * Limit of one tool call, also set as each tool's `timeoutMs`. Default: none of its own, so the
   * agent's tool timeout (60 s by default) applies through the call's signal.
   */
  callTimeoutMs?: number;
  /**
   * The file the servers were configured in (e.g. `agentloop.json`, or the `--config` path),
   * named in every error and warning about a server. Default: none named.
   */
  configFile?: string;
  /** Names already taken by built-in and local tools: they win every collision. */
  reservedNames?: readonly string[];
  /** Non-fatal problems: an optional server that failed, a renamed or skipped tool. Must not throw. */
  onWarning?: (message: string) => void;
  /** Called after the tool list changed (servers announced new tools, a restart listed others). */
  onChanged?: () => void;
  /** Each line a stdio server writes on stderr. Default: dropped, but quoted in startup errors. */
  onServerLog?: (server: string, line: string) => void;
  /** How the client introduces itself to servers. Default `{ name: "agentloop", version: "0.1.0" }`. */
  clientInfo?: { name: string; version: string };
}

/** Where a tool comes from: its exposed name, its server and the name the server gave it. */
export interface McpToolSource {
  name: string;
  server: string;
  originalName: string;
}

export interface McpServerStatus {
  name: string;
  /** `down`: lost its connection and restarts on the next call; `failed`: an optional server that did not start. */
  state: "up" | "down" | "failed" | "closed";
  transport?: McpTransportKind;
  /** The stdio child's pid while it runs. */
  pid?: number;
  error?: string;
}

/** The tools of every configured MCP server, kept current while the servers run. */
export interface McpToolset {
  /**
   * The tools in a fixed order: servers in configuration order, each server's tools in the order
   * it listed them. A new array, the same until the catalogue changes.
   */
  tools(): Tool[];
  /** One entry per tool of `tools()`, in the same order. */
  sources(): McpToolSource[];
  servers(): McpServerStatus[];
  /** Listens for catalogue changes (read `tools()` again); returns the unsubscribe function. */
  on(event: "changed", listener: () => void): () => void;
  /** Closes every connection and ends every child process. Idempotent; never rejects. */
  close(): Promise<void>;
}

const DEFAULT_STARTUP_TIMEOUT_MS = 30_000;

/**
 * Starts every server in parallel and lists their tools.
 * @throws AgentloopError("mcp_start") naming the first server (in configuration order) that is
 * not `optional` and failed to start or to list its tools, after closing the others: one line
 * with the config file, the true cause (command not found, exit code and last stderr lines, HTTP
 * 401, nothing listening, timeout...) and what to check. An optional server that fails is a
 * warning and is left out.
 */
export async function connectMcpServers(
  servers: Readonly<Record<string, McpServerConfig>>,
  options: ConnectMcpOptions = {},
): Promise<McpToolset> {
  const warn = (message: string) => options.onWarning?.(message);
  const warned = new Set<string>();
  const warnOnce = (message: string) => {
    if (warned.has(message)) return;
    warned.add(message);
    warn(message);
  };
  let catalogue: { tool: Tool; source: McpToolSource }[] = [];
  let catalogueKey = "";
  let ready = false;
  const listeners = new Set<() => void>();
  if (options.onChanged) listeners.add(options.onChanged);

  const connections = Object.entries(servers).map(
    ([name, config]) =>
      new McpConnection(name, config, {
        clientInfo: options.clientInfo ?? { name: "agentloop", version: "0.1.0" },
        startupTimeoutMs: options.startupTimeoutMs ?? DEFAULT_STARTUP_TIMEOUT_MS,
        ...(options.callTimeoutMs !== undefined && { callTimeoutMs: options.callTimeoutMs }),
        ...(options.configFile !== undefined && { configFile: options.configFile }),
        onToolsChanged: () => {
          if (ready && rebuild()) emitChanged();
        },
        onWarning: warnOnce,
        ...(options.onServerLog && { onStderr: (line: string) => options.onServerLog?.(name, line) }),
      }),
  );
  const failed = new Map<McpConnection, string>();
  const fixes = new Map<McpConnection, string>();
  const results = await Promise.allSettled(connections.map((connection) => connection.start()));
  results.forEach((result, index) => {
    if (result.status === "fulfilled") return;
    const connection = connections[index] as McpConnection;
    failed.set(connection, errorMessage(result.reason));
    if (result.reason instanceof StartFailure) fixes.set(connection, result.reason.fix);
  });
  const fatal = connections.find(
    (connection) => failed.has(connection) && connection.config.optional !== true,
  );
  if (fatal) {
    await Promise.all(connections.map((connection) => connection.close()));
    throw new AgentloopError(
      "mcp_start",
      `${fatal.label} failed to start: ${failed.get(fatal)}. ${fixes.get(fatal) ?? "Check its configuration"}, or mark it "optional": true.`,
    );
  }
  for (const [connection, reason] of failed) {
    warn(`${connection.label} failed to start and is skipped (it is optional): ${reason}.`);
    await connection.close();
  }
  const live = connections.filter((connection) => !failed.has(connection));

  /** Recomputes names and tools; true when anything the model sees changed. */
  function rebuild(): boolean {
    const listed = live.flatMap((connection) => connection.tools.map((tool) => ({ connection, tool })));
    const names = assignToolNames(
      listed.map(({ connection, tool }) => ({ server: connection.name, tool: tool.name })),
      options.reservedNames ?? [],
    );
    catalogue = listed.map(({ connection, tool }, index) => {
      const { name, warning } = names[index] ?? { name: tool.name };
      if (warning !== undefined) warnOnce(warning);
      return {
        tool: mcpTool(connection, tool, name, options.callTimeoutMs, warnOnce),
        source: { name, server: connection.name, originalName: tool.name },
      };
    });
    const key = JSON.stringify(
      catalogue.map(({ tool }) => [tool.name, tool.description, tool.parameters, tool.annotations]),
    );
    const changed = key !== catalogueKey;
    catalogueKey = key;
    return changed;
  }
  function emitChanged(): void {
    for (const listener of listeners) {
      try {
        listener();
      } catch (error) {
        warn(`A listener of MCP tool changes threw: ${errorMessage(error)}`);
      }
    }
  }
  rebuild();
  ready = true;

  let closing: Promise<void> | undefined;
  return {
    tools: () => catalogue.map(({ tool }) => tool),
    sources: () => catalogue.map(({ source }) => ({ ...source })),
    servers: () =>
      connections.map((connection) => {
        const error = failed.get(connection);
        return {
          name: connection.name,
          state: error !== undefined ? "failed" : connection.state === "starting" ? "up" : connection.state,
          ...(connection.kind !== undefined && { transport: connection.kind }),
          ...(connection.pid !== undefined && { pid: connection.pid }),
          ...(error !== undefined && { error }),
        };
      }),
    on: (_event, listener) => {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    close: () => {
      closing ??= Promise.all(connections.map((connection) => connection.close())).then(() => {
        listeners.clear();
      });
      return closing;
    },
  };
}

/**
 * One MCP tool as an agentloop tool. Arguments are validated against the server's input
 * schema; a result with `isError` throws its text, so the loop makes it an error result. The
 * server's annotations are kept (a `destructiveHint: true` tool needs approval).
 */
function mcpTool(
  connection: McpConnection,
  listed: McpTool,
  name: string,
  timeoutMs: number | undefined,
  warn: (message: string) => void,
): Tool {
  const { $schema: _ignored, ...schema } = listed.inputSchema as JsonSchema;
  const parameters: JsonSchema = { ...schema, type: "object" };
  const description = listed.description ?? listed.title ?? "";
  const execute = async (args: Record<string, unknown>, context: ToolContext) => {
    const result = await connection.call(listed.name, args, {
      signal: context.signal,
      ...(context.onProgress && { onProgress: context.onProgress }),
    });
    const text = mcpResultToText(result);
    if (result.isError) throw new Error(text || `Tool '${name}' of MCP server '${connection.name}' failed.`);
    return text;
  };
  const definition = {
    name,
    description,
    parameters,
    execute,
    ...(timeoutMs !== undefined && { timeoutMs }),
    // Kept as the server gave them: `destructiveHint: true` makes calls need approval.
    ...(listed.annotations && { annotations: listed.annotations }),
  };
  try {
    return defineTool(definition);
  } catch (error) {
    // A schema zod cannot read (e.g. draft-07 `definitions`): the server still validates.
    warn(
      `MCP tool '${listed.name}' of server '${connection.name}': arguments are not checked locally (${errorMessage(error)}).`,
    );
    return {
      ...definition,
      validate: (args) =>
        typeof args === "object" && args !== null && !Array.isArray(args)
          ? { ok: true, value: args }
          : { ok: false, message: "(arguments): expected an object" },
      execute: (args, context) => execute(args as Record<string, unknown>, context),
    };
  }
}
