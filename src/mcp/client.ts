import type { GetPromptResult, Tool as McpTool } from "@modelcontextprotocol/sdk/types.js";
import { AgentloopError, errorMessage } from "../core/errors.js";
import { defineTool, type JsonSchema, type Tool, type ToolContext } from "../tools/tool.js";
import { isHttpConfig, type McpServerConfig, type McpTransportKind } from "./config.js";
import { McpConnection } from "./connection.js";
import type { ElicitationHandler } from "./elicitation.js";
import { StartCancelled, StartFailure } from "./failure.js";
import { assignToolNames } from "./names.js";
import { McpOAuthProvider } from "./oauth-provider.js";
import { fileTokenStore, type McpTokenStore } from "./oauth-store.js";
import { mcpResultToOutput, mcpResultToText } from "./result.js";
import type { McpRoot } from "./server-requests.js";

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
  /**
   * Answers a server's request for input during a tool call (MCP elicitation, form mode): ask a
   * person, or fill in defaults. Default: every request is declined. Forms outside the restricted
   * shape MCP allows, and answers that do not fit the form, are declined with a warning.
   */
  onElicitation?: ElicitationHandler;
  /**
   * What servers without `roots` of their own get from `roots/list`: where they may work. Servers
   * that honour roots, such as the filesystem server, then use these instead of the directories in
   * their arguments. Default: none, and no roots capability is declared, so a server stays where
   * its configuration puts it (the working directory is never offered unasked).
   */
  roots?: readonly McpRoot[];
  /**
   * Gives up starting the servers (Ctrl+C): a server still connecting, or waiting for a person to
   * sign in in the browser, stops at once, every server is closed and `connectMcpServers` rejects
   * with `AgentloopError("aborted")`. Servers that had all started by then are returned as usual.
   */
  signal?: AbortSignal;
  /**
   * OAuth sign-ins of remote servers (every `url` server without an `Authorization` header, as in
   * Claude Code and VS Code; `oauth` in its config tunes it).
   */
  oauth?: {
    /**
     * Where tokens and client registrations are kept. Default `fileTokenStore()`: one file per
     * server under the per-user config directory, mode 0600, shared with `agentloop mcp login`.
     */
    store?: McpTokenStore;
    /**
     * Lets a person sign in when a server asks: opens the authorization URL in a browser (e.g. with
     * `openInBrowser`) and shows `message`; the answer comes back on a loopback callback
     * (127.0.0.1). Without it, a server that needs a person to sign in fails to start (or a call
     * fails) naming `agentloop mcp login <server>`; stored tokens are still used and refreshed.
     */
    openUrl?: (url: string, message: string) => void | Promise<void>;
  };
}

/** A prompt a server offers (MCP prompts): a message template with named arguments. */
export interface McpPromptInfo {
  /** The name to use it by: the server's (provider-safe), or `<server>__<name>` when taken by an earlier server. */
  name: string;
  server: string;
  originalName: string;
  title?: string;
  description?: string;
  arguments: { name: string; description?: string; required: boolean }[];
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
  /** The servers' prompts: servers in configuration order, each server's in its order. */
  prompts(): McpPromptInfo[];
  /**
   * Renders a prompt (by `McpPromptInfo.name`) with its arguments: the messages to send.
   * Rejects with one line: an unknown prompt, a missing required argument, the server's error.
   */
  getPrompt(name: string, args?: Record<string, string>): Promise<GetPromptResult>;
  /** Listens for catalogue changes (read `tools()` again); returns the unsubscribe function. */
  on(event: "changed", listener: () => void): () => void;
  /** Closes every connection and ends every child process. Idempotent; never rejects. */
  close(): Promise<void>;
}

const DEFAULT_STARTUP_TIMEOUT_MS = 30_000;

/**
 * Starts every server in parallel and lists their tools.
 * @throws AgentloopError("aborted") when `options.signal` aborted the start.
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

  const store = options.oauth?.store ?? fileTokenStore({ onWarning: warnOnce });
  const openUrl = options.oauth?.openUrl;
  const signIn = (name: string, config: McpServerConfig) =>
    isHttpConfig(config) && !Object.keys(config.headers ?? {}).some((key) => /^authorization$/i.test(key))
      ? new McpOAuthProvider(name, config.url, config.oauth ?? {}, { store, ...(openUrl && { openUrl }) })
      : undefined;
  const connections = Object.entries(servers).map(
    ([name, config]) =>
      new McpConnection(name, config, {
        roots: config.roots ?? options.roots,
        ...(options.onElicitation && { onElicitation: options.onElicitation }),
        onRequestWarning: warn,
        clientInfo: options.clientInfo ?? { name: "agentloop", version: "0.1.0" },
        startupTimeoutMs: options.startupTimeoutMs ?? DEFAULT_STARTUP_TIMEOUT_MS,
        ...(options.callTimeoutMs !== undefined && { callTimeoutMs: options.callTimeoutMs }),
        ...(options.configFile !== undefined && { configFile: options.configFile }),
        onToolsChanged: () => {
          if (ready && rebuild()) emitChanged();
        },
        onWarning: warnOnce,
        ...(options.onServerLog && { onStderr: (line: string) => options.onServerLog?.(name, line) }),
        oauth: signIn(name, config),
      }),
  );
  const failed = new Map<McpConnection, string>();
  const fixes = new Map<McpConnection, string>();
  const results = await Promise.allSettled(connections.map((connection) => connection.start(options.signal)));
  const cancelled = results.flatMap((result, index) =>
    result.status === "rejected" && result.reason instanceof StartCancelled
      ? [{ connection: connections[index] as McpConnection, signingIn: result.reason.signingIn }]
      : [],
  );
  if (cancelled.length > 0) {
    await Promise.all(connections.map((connection) => connection.close()));
    const signIn = cancelled.find((c) => c.signingIn)?.connection;
    throw new AgentloopError(
      "aborted",
      signIn
        ? `sign-in to MCP server '${signIn.name}' cancelled.`
        : `cancelled while MCP server '${cancelled[0]?.connection.name}' was starting.`,
    );
  }
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
        tool: mcpTool(
          connection,
          tool,
          name,
          connection.config.toolTimeoutMs ?? options.callTimeoutMs,
          warnOnce,
        ),
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

  /** Every live server's prompts with the names to use them by (computed when asked: prompts change rarely). */
  function promptCatalogue(): { info: McpPromptInfo; connection: McpConnection }[] {
    const listed = live.flatMap((connection) => connection.prompts.map((prompt) => ({ connection, prompt })));
    const names = assignToolNames(
      listed.map(({ connection, prompt }) => ({ server: connection.name, tool: prompt.name })),
      [],
    );
    return listed.map(({ connection, prompt }, index) => ({
      connection,
      info: {
        name: names[index]?.name ?? prompt.name,
        server: connection.name,
        originalName: prompt.name,
        ...(prompt.title !== undefined && { title: prompt.title }),
        ...(prompt.description !== undefined && { description: prompt.description }),
        arguments: (prompt.arguments ?? []).map((a) => ({
          name: a.name,
          ...(a.description !== undefined && { description: a.description }),
          required: a.required === true,
        })),
      },
    }));
  }

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
    prompts: () =>
      promptCatalogue().map(({ info }) => ({ ...info, arguments: info.arguments.map((a) => ({ ...a })) })),
    getPrompt: async (name, args = {}) => {
      const entry = promptCatalogue().find(({ info }) => info.name === name);
      if (!entry) throw new AgentloopError("mcp_prompt", `No MCP prompt is named '${name}'.`);
      const missing = entry.info.arguments.filter((a) => a.required && (args[a.name] ?? "") === "");
      if (missing.length > 0) {
        const names = missing.map((a) => a.name).join(", ");
        throw new AgentloopError(
          "mcp_prompt",
          `Prompt '${name}' needs ${names}: give ${missing.map((a) => `${a.name}=…`).join(" ")}.`,
        );
      }
      return entry.connection.getPrompt(entry.info.originalName, args);
    },
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
 * schema; a result with `isError` throws its text, so the loop makes it an error result; another
 * result's images and audio go with its text (`toolOutput`). The
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
    if (result.isError) {
      throw new Error(mcpResultToText(result) || `Tool '${name}' of MCP server '${connection.name}' failed.`);
    }
    return mcpResultToOutput(result); // images and audio reach the model as such
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
