import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import {
  type CallToolResult,
  type GetPromptResult,
  type Prompt as McpPrompt,
  type Tool as McpTool,
  PromptListChangedNotificationSchema,
  ToolListChangedNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";
import { errorMessage } from "../core/errors.js";
import { globMatcher } from "../tools/glob.js";
import type { ToolProgress } from "../tools/tool.js";
import type { McpServerConfig, McpTransportKind } from "./config.js";
import type { ElicitationHandler } from "./elicitation.js";
import { describeFailure, redactConfig, StartCancelled, StartFailure, startup } from "./failure.js";
import { SignInCancelled } from "./oauth-errors.js";
import type { McpOAuthProvider } from "./oauth-provider.js";
import { progressGate } from "./progress.js";
import { answerServerRequests, clientCapabilities, type McpRoot } from "./server-requests.js";
import { StdioTransport } from "./stdio.js";
import { closeClient, listAllPrompts, listAllTools, openClient } from "./transport.js";

export interface ConnectionOptions {
  clientInfo: { name: string; version: string };
  startupTimeoutMs: number;
  /** Limit of one `tools/call`; none of its own when absent (the caller's signal decides). */
  callTimeoutMs?: number;
  /** The file the server was configured in, named in every error. */
  configFile?: string;
  /** Called after the listed tools changed (a list_changed notification, or a restart). */
  onToolsChanged: () => void;
  onWarning: (message: string) => void;
  /** What `roots/list` answers; without them the client declares no roots capability. */
  roots?: readonly McpRoot[] | undefined;
  /** Answers the server's requests for input; without it they are declined. */
  onElicitation?: ElicitationHandler;
  /** A request of the server that was refused (e.g. a malformed form): each one, not deduplicated. */
  onRequestWarning: (message: string) => void;
  /** Each line a stdio server writes on stderr. */
  onStderr?: (line: string) => void;
  /** Signs in to a remote server that asks for it (OAuth). */
  oauth?: McpOAuthProvider;
}

export type ConnectionState = "starting" | "up" | "down" | "closed";

/** One attempt to reach the server: the client and the transport it speaks over. */
interface Link {
  client: Client;
  transport: Transport;
}

/** Longest delay a Node timer accepts: "no limit" for the SDK's request timeout. */
const NO_TIMEOUT = 2 ** 31 - 1;
/** Sign-ins one request may take (a server may keep asking for scopes it never grants). */
const MAX_SIGN_INS = 3;

/**
 * One MCP server: connects, lists its tools, calls them, restarts after a crash. A lost
 * connection marks it `down`; the next `call` restarts it once before calling.
 */
export class McpConnection {
  state: ConnectionState = "starting";
  kind: McpTransportKind | undefined;
  /** The tools the server listed last, in its order; tools that need MCP tasks are left out. */
  tools: readonly McpTool[] = [];
  /** The prompts the server listed last (none when it has no `prompts` capability). */
  prompts: readonly McpPrompt[] = [];
  /** `MCP server 'name' (file)`: how every message names this server. */
  readonly label: string;
  private link: Link | undefined;
  private opening: Link | undefined;
  private starting: Promise<void> | undefined;
  private stderrTail = "";
  private refreshing = false;
  private refreshAgain = false;
  private readonly skipped = new Set<string>();
  /** The config's `tools` filter: whether a tool (by the server's name) is offered. */
  private readonly offered: (tool: string) => boolean;

  constructor(
    readonly name: string,
    readonly config: McpServerConfig,
    private readonly options: ConnectionOptions,
  ) {
    const file = options.configFile;
    this.label = `MCP server '${name}'${file ? ` (${file})` : ""}`;
    const { allow, deny } = config.tools ?? {};
    const allowed = allow ? globMatcher(allow) : () => true;
    const denied = globMatcher(deny ?? []);
    this.offered = (tool) => allowed(tool) && !denied(tool);
  }

  /** Pid of the stdio child while it runs. */
  get pid(): number | undefined {
    const transport = this.link?.transport;
    return transport instanceof StdioTransport && transport.exit === undefined ? transport.pid : undefined;
  }

  /**
   * Connects and lists the tools within the startup timeout.
   * Rejects with a `StartFailure`: a one-line reason and what to check; with a `StartCancelled`
   * once `signal` aborts (a sign-in waiting for the browser ends at once).
   */
  start(signal?: AbortSignal): Promise<void> {
    this.starting ??= this.open(signal).finally(() => {
      this.starting = undefined;
    });
    return this.starting;
  }

  /**
   * Calls a tool by its original name. Rejects with one line naming the server, the cause and,
   * when the configuration can help, the fix: the server is down and cannot be restarted, drops
   * the connection, exits, answers 401, sends a result over the size limit, times out.
   */
  async call(
    tool: string,
    args: Record<string, unknown>,
    options: { signal?: AbortSignal; onProgress?: (progress: ToolProgress) => void },
  ): Promise<CallToolResult> {
    const link = await this.running();
    const { signal, onProgress } = options;
    const progress = onProgress && progressGate(onProgress);
    const request = {
      timeout: this.options.callTimeoutMs ?? NO_TIMEOUT, // a per-server toolTimeout is the tool's own timeoutMs, enforced by the executor
      ...(signal && { signal }),
      ...(progress && { onprogress: progress.report }),
    };
    try {
      return (await this.signedIn(
        () => link.client.callTool({ name: tool, arguments: args }, undefined, request),
        () => link.transport,
        signal,
      )) as CallToolResult;
    } catch (error) {
      if (signal?.aborted) throw new Error(`The call to '${tool}' on ${this.label} was cancelled.`);
      // Read again: close() may have run while the call was in flight.
      if ((this.state as ConnectionState) === "closed")
        throw new Error(`${this.label} was closed during the call to '${tool}'.`);
      const { reason, fix, lost } = this.describe(error, link.transport, "call");
      if (lost) this.drop(link);
      throw new Error(`${this.label} could not run '${tool}': ${reason}.${fix ? ` ${fix}.` : ""}`);
    } finally {
      // Before the result; a cancelled or timed-out call has its result already.
      progress?.end(signal?.aborted ? "drop" : "send");
    }
  }

  /** Renders a prompt by its original name. Rejects with one line naming the server and the cause. */
  async getPrompt(prompt: string, args: Record<string, string>): Promise<GetPromptResult> {
    const link = await this.running();
    try {
      return await link.client.getPrompt(
        { name: prompt, arguments: args },
        { timeout: this.options.startupTimeoutMs },
      );
    } catch (error) {
      const { reason, fix, lost } = this.describe(error, link.transport, "call");
      if (lost) this.drop(link);
      throw new Error(`${this.label} could not give prompt '${prompt}': ${reason}.${fix ? ` ${fix}.` : ""}`);
    }
  }

  /** The live link, restarting the server once when it is down. */
  private async running(): Promise<Link> {
    if (this.state === "closed") throw new Error(`${this.label} is closed.`);
    if (!this.link) {
      try {
        await this.start();
      } catch (error) {
        const fix = error instanceof StartFailure ? ` ${error.fix}.` : "";
        throw new Error(`${this.label} stopped and could not be restarted: ${errorMessage(error)}.${fix}`);
      }
    }
    const link = this.link;
    if (!link) throw new Error(`${this.label} is not running.`);
    return link;
  }

  /** Closes the connection and ends the child's process tree. Idempotent; never rejects. */
  async close(): Promise<void> {
    if (this.state === "closed") return;
    this.state = "closed";
    const links = [this.link, this.opening];
    this.link = undefined;
    await Promise.all(links.map((link) => closeClient(link?.client, link?.transport)));
    await this.options.oauth?.close();
    await this.starting?.catch(() => {});
  }

  /**
   * Connects, then lists the tools, each within the startup timeout. A sign-in in the browser
   * happens between attempts, so a person's time does not count against it.
   */
  private async open(signal: AbortSignal | undefined): Promise<void> {
    const { startupTimeoutMs, oauth } = this.options;
    this.stderrTail = "";
    try {
      await oauth?.load();
      const { client, kind } = await this.signedIn(
        () =>
          startup(
            openClient(this.config, (transport) => this.attach(transport), {
              onStderr: (text) => this.onStderr(text),
              oauth,
            }),
            startupTimeoutMs,
            signal,
          ),
        () => this.opening?.transport,
        signal,
      );
      const opened = this.opening;
      const tools = await this.signedIn(
        () => startup(listAllTools(client, startupTimeoutMs), startupTimeoutMs, signal),
        () => opened?.transport,
        signal,
      );
      const prompts = await startup(this.listPrompts(client), startupTimeoutMs, signal);
      if (this.state === "closed") throw new Error("the connection was closed while starting");
      this.link = opened;
      this.kind = kind;
      this.state = "up";
      this.setTools(tools);
      this.prompts = prompts;
    } catch (error) {
      const opening = this.opening;
      await closeClient(opening?.client, opening?.transport);
      if (signal?.aborted)
        throw new StartCancelled(error instanceof SignInCancelled || oauth?.awaitingBrowser === true);
      const { reason, fix } = this.describe(error, opening?.transport, "start");
      throw new StartFailure(reason, fix ?? "Check its configuration");
    } finally {
      this.opening = undefined;
    }
  }

  /**
   * Runs `work`; when it failed because the server asked for a sign-in that is now under way in
   * the browser, waits for the person, completes the sign-in over `transport` and runs `work`
   * again, up to `MAX_SIGN_INS` times.
   */
  private async signedIn<T>(
    work: () => Promise<T>,
    transport: () => Transport | undefined,
    signal?: AbortSignal,
  ): Promise<T> {
    for (let signIns = 0; ; signIns++) {
      try {
        return await work();
      } catch (error) {
        const oauth = this.options.oauth;
        if (!(error instanceof UnauthorizedError) || !oauth || signIns >= MAX_SIGN_INS) throw error;
        const code = await oauth.takeCode(signal);
        const target = transport();
        const http = target instanceof StreamableHTTPClientTransport || target instanceof SSEClientTransport;
        if (code === undefined || !http) throw error;
        await target.finishAuth(code);
      }
    }
  }

  /** Connects a new client over `transport`, watching for its loss and for tool list changes. */
  private async attach(transport: Transport): Promise<Client> {
    const client = new Client(this.options.clientInfo, {
      capabilities: clientCapabilities(this.options.roots),
    });
    const link = { client, transport };
    this.opening = link;
    client.onclose = () => this.lost(link);
    // Transport errors also surface as failed requests or a close; nothing to add here.
    client.onerror = () => {};
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => this.refresh(client));
    client.setNotificationHandler(PromptListChangedNotificationSchema, async () => {
      const prompts = await this.listPrompts(client);
      if (client === this.link?.client) this.prompts = prompts;
    });
    answerServerRequests(client, {
      server: this.name,
      label: this.label,
      roots: this.options.roots,
      onElicitation: this.options.onElicitation,
      warn: this.options.onRequestWarning,
    });
    try {
      await client.connect(transport, { timeout: this.options.startupTimeoutMs });
    } catch (error) {
      await closeClient(client, transport);
      throw error;
    }
    return client;
  }

  private lost(link: Link): void {
    if (link !== this.link) return;
    this.link = undefined;
    if (this.state === "up") this.state = "down";
    // A stdio server's process tree may outlive the connection: end what is left of it.
    void closeClient(undefined, link.transport);
  }

  /** Abandons a connection that failed mid-call, so the next call restarts the server. */
  private drop(link: Link): void {
    if (link !== this.link) return;
    this.lost(link);
    void closeClient(link.client, link.transport);
  }

  private describe(error: unknown, transport: Transport | undefined, phase: "start" | "call") {
    const signIn = this.options.oauth?.explain(error);
    const failure = signIn
      ? { ...signIn, lost: false }
      : describeFailure(error, { config: this.config, transport, stderr: this.stderrTail, phase });
    return {
      ...failure,
      reason: redactConfig(this.config, failure.reason),
    };
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
        if (client !== this.link?.client) return;
        const tools = await listAllTools(client, this.options.startupTimeoutMs);
        if (client === this.link?.client) this.setTools(tools);
      } while (this.refreshAgain);
    } catch (error) {
      if (client === this.link?.client) {
        this.options.onWarning(
          `${this.label} announced new tools but listing them failed: ${errorMessage(error)}`,
        );
      }
    } finally {
      this.refreshing = false;
    }
  }

  private setTools(listed: readonly McpTool[]): void {
    const tools = listed.filter((tool) => {
      if (!this.offered(tool.name)) return false;
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

  /** The server's prompts, or none when it has none or listing them fails (a warning). */
  private async listPrompts(client: Client): Promise<McpPrompt[]> {
    if (!client.getServerCapabilities()?.prompts) return [];
    try {
      return await listAllPrompts(client, this.options.startupTimeoutMs);
    } catch (error) {
      this.options.onWarning(`${this.label} has prompts but listing them failed: ${errorMessage(error)}`);
      return [];
    }
  }

  private onStderr(text: string): void {
    this.stderrTail = (this.stderrTail + text).slice(-2000);
    if (!this.options.onStderr) return;
    for (const line of text.split(/\r?\n/)) if (line.trim() !== "") this.options.onStderr(line);
  }
}

function toolKey(tool: McpTool): unknown[] {
  return [tool.name, tool.description, tool.inputSchema, tool.annotations];
}
