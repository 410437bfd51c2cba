import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import {
  type CallToolResult,
  type Tool as McpTool,
  ToolListChangedNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";
import { errorMessage } from "../core/errors.js";
import { redactSecrets } from "../core/redact.js";
import type { ToolProgress } from "../tools/tool.js";
import { trackChild, untrackChild } from "./children.js";
import { isStdioConfig, type McpServerConfig, type McpTransportKind } from "./config.js";
import { closeClient, isConnectionLoss, listAllTools, openClient } from "./transport.js";

export interface ConnectionOptions {
  clientInfo: { name: string; version: string };
  startupTimeoutMs: number;
  /** Limit of one `tools/call`; none of its own when absent (the caller's signal decides). */
  callTimeoutMs?: number;
  /** Called after the listed tools changed (a list_changed notification, or a restart). */
  onToolsChanged: () => void;
  onWarning: (message: string) => void;
  /** Each line a stdio server writes on stderr. */
  onStderr?: (line: string) => void;
}

export type ConnectionState = "starting" | "up" | "down" | "closed";

/** Longest delay a Node timer accepts: "no limit" for the SDK's request timeout. */
const NO_TIMEOUT = 2 ** 31 - 1;

/**
 * One MCP server: connects, lists its tools, calls them, restarts after a crash. A lost
 * connection marks it `down`; the next `call` restarts it once before calling.
 */
export class McpConnection {
  state: ConnectionState = "starting";
  kind: McpTransportKind | undefined;
  /** The tools the server listed last, in its order; tools that need MCP tasks are left out. */
  tools: readonly McpTool[] = [];
  /** Pid of the stdio child while it runs. */
  pid: number | undefined;
  private client: Client | undefined;
  private opening: Client | undefined;
  private starting: Promise<void> | undefined;
  private stderrTail = "";
  private refreshing = false;
  private refreshAgain = false;
  private readonly skipped = new Set<string>();

  constructor(
    readonly name: string,
    readonly config: McpServerConfig,
    private readonly options: ConnectionOptions,
  ) {}

  /** Connects and lists the tools within the startup timeout. Rejects with a one-line reason. */
  start(): Promise<void> {
    this.starting ??= this.open().finally(() => {
      this.starting = undefined;
    });
    return this.starting;
  }

  /**
   * Calls a tool by its original name. Rejects with a message naming the server when the
   * server is down and cannot be restarted, drops the connection, or fails the request.
   */
  async call(
    tool: string,
    args: Record<string, unknown>,
    options: { signal?: AbortSignal; onProgress?: (progress: ToolProgress) => void },
  ): Promise<CallToolResult> {
    if (this.state === "closed") throw new Error(`MCP server '${this.name}' is closed.`);
    if (!this.client) {
      try {
        await this.start();
      } catch (error) {
        throw new Error(
          `MCP server '${this.name}' stopped and could not be restarted: ${errorMessage(error)}`,
        );
      }
    }
    const client = this.client;
    if (!client) throw new Error(`MCP server '${this.name}' is not running.`);
    const { signal, onProgress } = options;
    try {
      return (await client.callTool({ name: tool, arguments: args }, undefined, {
        timeout: this.options.callTimeoutMs ?? NO_TIMEOUT,
        ...(signal && { signal }),
        ...(onProgress && {
          onprogress: ({ progress, total, message }) =>
            onProgress({
              progress,
              ...(total !== undefined && { total }),
              ...(message !== undefined && { message }),
            }),
        }),
      })) as CallToolResult;
    } catch (error) {
      if (signal?.aborted)
        throw new Error(`The call to '${tool}' on MCP server '${this.name}' was cancelled.`);
      if (isConnectionLoss(error)) {
        this.drop(client);
        throw new Error(
          `MCP server '${this.name}' stopped during the call to '${tool}': ${this.reason(error)}. It will be restarted on the next call.`,
        );
      }
      throw new Error(
        `MCP server '${this.name}' could not run '${tool}': ${this.redact(errorMessage(error))}`,
      );
    }
  }

  /** Closes the connection and ends the child process. Idempotent; never rejects. */
  async close(): Promise<void> {
    if (this.state === "closed") return;
    this.state = "closed";
    const clients = [this.client, this.opening];
    this.client = undefined;
    await Promise.all(clients.map((client) => closeClient(client)));
    await this.starting?.catch(() => {});
    this.forgetChild();
  }

  private async open(): Promise<void> {
    const { startupTimeoutMs } = this.options;
    this.stderrTail = "";
    let timer: NodeJS.Timeout | undefined;
    const work = (async () => {
      const connected = await this.connect();
      return { ...connected, tools: await listAllTools(connected.client, startupTimeoutMs) };
    })();
    const expired = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`no answer within ${startupTimeoutMs / 1000} s`)),
        startupTimeoutMs,
      );
    });
    try {
      const { client, kind, tools } = await Promise.race([work, expired]);
      if (this.state === "closed") throw new Error("the connection was closed while starting");
      this.client = client;
      this.kind = kind;
      this.state = "up";
      this.setTools(tools);
    } catch (error) {
      work.catch(() => {});
      const opening = this.opening;
      this.forgetChild();
      await closeClient(opening);
      throw new Error(this.reason(error));
    } finally {
      clearTimeout(timer);
      this.opening = undefined;
    }
  }

  private async connect(): Promise<{ client: Client; kind: McpTransportKind }> {
    const opened = await openClient(this.config, (transport) => this.attach(transport), {
      onStderr: (text) => this.onStderr(text),
    });
    if (opened.pid !== undefined && this.state !== "closed") {
      this.pid = opened.pid;
      trackChild(opened.pid);
    }
    return opened;
  }

  /** Connects a new client over `transport`, watching for its loss and for tool list changes. */
  private async attach(transport: Transport): Promise<Client> {
    const client = new Client(this.options.clientInfo, { capabilities: {} });
    this.opening = client;
    client.onclose = () => this.lost(client);
    // Transport errors also surface as failed requests or a close; nothing to add here.
    client.onerror = () => {};
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => this.refresh(client));
    await client.connect(transport, { timeout: this.options.startupTimeoutMs });
    return client;
  }

  private lost(client: Client): void {
    if (client !== this.client) return;
    this.client = undefined;
    this.forgetChild();
    if (this.state === "up") this.state = "down";
  }

  /** Abandons a connection that failed mid-call, so the next call restarts the server. */
  private drop(client: Client): void {
    if (client !== this.client) return;
    this.lost(client);
    void closeClient(client);
  }

  private forgetChild(): void {
    if (this.pid !== undefined) untrackChild(this.pid);
    this.pid = undefined;
  }

  private async refresh(client: Client): Promise<void> {
    if (this.refreshing) {
      this.refreshAgain = true;
      return;
    }
    this.refreshing = true;
    try {
      // A notification during startup is answered once the start has finished.
      await this.starting?.catch(() => {});
      do {
        this.refreshAgain = false;
        if (client !== this.client) return;
        const tools = await listAllTools(client, this.options.startupTimeoutMs);
        if (client === this.client) this.setTools(tools);
      } while (this.refreshAgain);
    } catch (error) {
      if (client === this.client) {
        this.options.onWarning(
          `MCP server '${this.name}' announced new tools but listing them failed: ${errorMessage(error)}`,
        );
      }
    } finally {
      this.refreshing = false;
    }
  }

  private setTools(listed: readonly McpTool[]): void {
    const tools = listed.filter((tool) => {
      if (tool.execution?.taskSupport !== "required") return true;
      if (!this.skipped.has(tool.name)) {
        this.skipped.add(tool.name);
        this.options.onWarning(
          `MCP tool '${tool.name}' of server '${this.name}' is skipped: it runs only as an MCP task, which agentloop does not support.`,
        );
      }
      return false;
    });
    const before = JSON.stringify(this.tools.map(toolKey));
    this.tools = tools;
    if (JSON.stringify(tools.map(toolKey)) !== before) this.options.onToolsChanged();
  }

  private onStderr(text: string): void {
    this.stderrTail = (this.stderrTail + text).slice(-2000);
    if (!this.options.onStderr) return;
    for (const line of text.split(/\r?\n/)) if (line.trim() !== "") this.options.onStderr(line);
  }

  /** One line: why the server failed, with the end of its stderr when it said something. */
  private reason(error: unknown): string {
    const code = (error as { code?: unknown }).code;
    let reason = errorMessage(error);
    if (code === "ENOENT" && isStdioConfig(this.config))
      reason = `command '${this.config.command}' not found`;
    else if (isConnectionLoss(error)) reason = "the server closed the connection";
    const said = this.stderrTail.replace(/\s+/g, " ").trim();
    return this.redact(said === "" ? reason : `${reason} (stderr: ${said.slice(-300)})`);
  }

  /** Hides header values and secret-looking env values (keys, tokens, passwords) of the config. */
  private redact(text: string): string {
    const config = this.config as { env?: Record<string, string>; headers?: Record<string, string> };
    const secretEnv = Object.entries(config.env ?? {}).filter(([key]) =>
      /key|token|secret|pass|auth|credential/i.test(key),
    );
    return redactSecrets(text, [
      ...Object.values(config.headers ?? {}),
      ...secretEnv.map(([, value]) => value),
    ]);
  }
}

function toolKey(tool: McpTool): unknown[] {
  return [tool.name, tool.description, tool.inputSchema];
}
