import type { ChildProcess } from "node:child_process";
import {
  deserializeMessage,
  STDIO_DEFAULT_MAX_BUFFER_SIZE,
  serializeMessage,
} from "@modelcontextprotocol/sdk/shared/stdio.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { ErrorCode, type JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import spawn from "cross-spawn";
import { ownProcessGroup, signalTree, trackChild, untrackChild } from "./children.js";

/** The largest message a stdio server may send: the SDK's read buffer limit (10 MB). */
export const MAX_STDIO_MESSAGE_BYTES = STDIO_DEFAULT_MAX_BUFFER_SIZE;

/** After stdin closes, how long a server has to exit before SIGTERM, then before SIGKILL. */
const GRACE_MS = 1000;
const POLL_MS = 25;

export interface StdioParams {
  command: string;
  args: readonly string[];
  env: Record<string, string>;
  cwd?: string;
  onStderr: (text: string) => void;
}

/**
 * The client side of an MCP stdio connection, framed like the SDK's `StdioClientTransport`
 * (one JSON-RPC message a line), with what that transport lacks: the server runs in its own
 * process group, so `close()` ends the whole tree (stdin closed, then SIGTERM, then SIGKILL, a
 * second apart) even when it is busy or ignores SIGTERM; how the server ended (`exit`) and
 * whether it sent a message over the size limit (`oversized`) stay readable after the close; a
 * reply that is not valid JSON-RPC fails its request at once (see `readMessage`).
 */
export class StdioTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  /** The child's pid once it started. */
  pid: number | undefined;
  /** How the child ended, once it did. */
  exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  /** The child sent a message larger than `MAX_STDIO_MESSAGE_BYTES`; the transport closed. */
  oversized = false;
  private child: ChildProcess | undefined;
  /** Received bytes not yet ending in a newline. */
  private buffer: Buffer | undefined;
  /** A drain waits for the next microtask (see `drain`). */
  private deferred = false;
  private closing: Promise<void> | undefined;

  constructor(private readonly params: StdioParams) {}

  start(): Promise<void> {
    const { command, args, env, cwd, onStderr } = this.params;
    return new Promise((resolve, reject) => {
      const child = spawn(command, args, {
        env,
        ...(cwd !== undefined && { cwd }),
        stdio: ["pipe", "pipe", "pipe"],
        detached: ownProcessGroup,
        windowsHide: true,
      });
      this.child = child;
      child.on("error", (error) => {
        if (this.pid === undefined) reject(error);
        else this.onerror?.(error);
      });
      child.once("spawn", () => {
        this.pid = child.pid;
        if (this.pid !== undefined) trackChild(this.pid);
        resolve();
      });
      child.once("exit", (code, signal) => {
        this.exit = { code, signal };
        // What the server started may live on holding our pipes, so "close" would never come.
        void this.close();
      });
      child.once("close", () => {
        this.child = undefined;
        this.buffer = undefined;
        if (this.pid !== undefined && !signalTree(this.pid, 0)) untrackChild(this.pid);
        this.onclose?.();
      });
      child.stdin?.on("error", (error) => this.onerror?.(error));
      child.stdout?.on("data", (chunk: Buffer) => this.receive(chunk));
      child.stderr?.on("data", (chunk: Buffer) => onStderr(chunk.toString("utf8")));
    });
  }

  send(message: JSONRPCMessage): Promise<void> {
    return new Promise((resolve, reject) => {
      const stdin = this.child?.stdin;
      if (!stdin?.writable) reject(new Error("Not connected"));
      else if (stdin.write(serializeMessage(message))) resolve();
      else stdin.once("drain", resolve);
    });
  }

  /** Ends the child's process tree; resolves once it is gone. Idempotent; never rejects. */
  close(): Promise<void> {
    this.closing ??= this.stop();
    return this.closing;
  }

  private receive(chunk: Buffer): void {
    if (this.oversized) return; // the rest of that message
    if ((this.buffer?.length ?? 0) + chunk.length > MAX_STDIO_MESSAGE_BYTES) {
      this.oversized = true;
      this.buffer = undefined;
      this.onerror?.(new Error(`a message over ${MAX_STDIO_MESSAGE_BYTES} bytes`));
      void this.close();
      return;
    }
    this.buffer = this.buffer ? Buffer.concat([this.buffer, chunk]) : chunk;
    if (!this.deferred) this.drain();
  }

  /**
   * Hands on each complete line. A reply after a notification waits a microtask: the SDK handles
   * a notification a microtask late and drops progress whose request has been answered by then,
   * so the last progress of a call would be lost.
   */
  private drain(): void {
    this.deferred = false;
    let buffer = this.buffer;
    let notified = false;
    for (let end = buffer?.indexOf(10) ?? -1; buffer && end !== -1; end = buffer.indexOf(10)) {
      const line = buffer.toString("utf8", 0, end).replace(/\r$/, "");
      let message: JSONRPCMessage;
      try {
        message = readMessage(line);
      } catch (error) {
        buffer = buffer.subarray(end + 1);
        this.onerror?.(error as Error); // a line that is not JSON-RPC: skipped
        continue;
      }
      const notification = !("id" in message);
      if (notified && !notification && !("method" in message)) {
        this.buffer = buffer; // the reply is read again then
        this.deferred = true;
        queueMicrotask(() => this.drain());
        return;
      }
      notified ||= notification;
      buffer = buffer.subarray(end + 1);
      this.onmessage?.(message);
    }
    this.buffer = buffer && buffer.length > 0 ? buffer : undefined;
  }

  private async stop(): Promise<void> {
    const pid = this.pid;
    if (pid === undefined) return;
    this.child?.stdin?.end();
    if (!(await this.gone(GRACE_MS))) {
      signalTree(pid, "SIGTERM");
      if (!(await this.gone(GRACE_MS))) {
        signalTree(pid, "SIGKILL");
        await this.gone(GRACE_MS);
      }
    }
    untrackChild(pid);
  }

  /** Waits up to `ms` for the child to exit and, outside Windows, for its whole group to end. */
  private async gone(ms: number): Promise<boolean> {
    const pid = this.pid as number;
    for (let waited = 0; ; waited += POLL_MS) {
      if (this.exit !== undefined && (!ownProcessGroup || !signalTree(pid, 0))) return true;
      if (waited >= ms) return false;
      // Not unref'd: a process that awaits close() before exiting must live until the tree is gone.
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    }
  }
}

/**
 * One line of the server's stdout as a message. A reply to a request (an `id`, no `method`) that
 * is not valid JSON-RPC, e.g. one with neither `result` nor `error`, becomes an error reply, so
 * the request fails at once instead of waiting for its timeout (the SDK drops such a line).
 * @throws for a line that is not JSON, or not JSON-RPC and not a reply: it is skipped.
 */
export function readMessage(line: string): JSONRPCMessage {
  try {
    return deserializeMessage(line);
  } catch (error) {
    const value: unknown = JSON.parse(line);
    if (typeof value !== "object" || value === null || "method" in value || !("id" in value)) throw error;
    const { id } = value;
    if (typeof id !== "string" && typeof id !== "number") throw error;
    const empty = !("result" in value) && !("error" in value);
    const message = empty
      ? "the server replied with neither a result nor an error"
      : "the server's reply is not valid JSON-RPC";
    return { jsonrpc: "2.0", id, error: { code: ErrorCode.InternalError, message } };
  }
}
