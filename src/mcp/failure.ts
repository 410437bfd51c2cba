import { STATUS_CODES } from "node:http";
import { SseError } from "@modelcontextprotocol/sdk/client/sse.js";
import { StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";
import { errorMessage } from "../core/errors.js";
import { environmentSecrets, redactSecrets } from "../core/redact.js";
import { configSecrets, isHttpConfig, isStdioConfig, type McpServerConfig } from "./config.js";
import { formatSize } from "./result.js";
import { MAX_STDIO_MESSAGE_BYTES, StdioTransport } from "./stdio.js";

/** Why a server failed, sorted by what the user can do about it. */
export interface Failure {
  /** The true cause, a clause without a final period, e.g. `nothing is listening at http://…`. */
  reason: string;
  /** What to do, a sentence without a final period; absent when the configuration cannot help. */
  fix?: string;
  /** The connection is gone: the next call starts the server again. */
  lost: boolean;
}

/** A server that did not connect and list its tools in time. */
class StartupTimeout extends Error {
  constructor(readonly ms: number) {
    super(`no answer within ${ms / 1000} s`);
  }
}

/** A server that failed to start: the message is the reason; `fix` says what to check. */
export class StartFailure extends Error {
  constructor(
    readonly reason: string,
    readonly fix: string,
  ) {
    super(reason);
  }
}

/** A start given up because the caller's signal aborted; `signingIn`: a sign-in was waiting for the browser. */
export class StartCancelled extends Error {
  constructor(readonly signingIn: boolean) {
    super(signingIn ? "the sign-in was cancelled" : "the start was cancelled");
  }
}

/**
 * `work`, or a `StartupTimeout` when it takes longer than `ms`, or a `StartCancelled` once
 * `signal` aborts.
 */
export function startup<T>(work: Promise<T>, ms: number, signal: AbortSignal | undefined): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  let onAbort = () => {};
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new StartupTimeout(ms)), ms);
    onAbort = () => reject(new StartCancelled(false));
    if (signal?.aborted) onAbort();
    else signal?.addEventListener("abort", onAbort, { once: true });
  });
  work.catch(() => {});
  return Promise.race([work, expired]).finally(() => {
    clearTimeout(timer);
    signal?.removeEventListener("abort", onAbort);
  });
}

/** Longest reason kept (an error a server sends may be megabytes): cut before it is redacted. */
const MAX_REASON_CHARS = 4000;

/**
 * `text`, cut to `MAX_REASON_CHARS`, with the config's secrets (`configSecrets`), the
 * environment's API keys and credentials hidden. The cut knows them all, so it never leaves the
 * head of one for a later redaction to miss.
 */
export function redactConfig(config: McpServerConfig, text: string): string {
  return redactSecrets(text, [...environmentSecrets(), ...configSecrets(config)], MAX_REASON_CHARS);
}

export interface FailureContext {
  config: McpServerConfig;
  /** The transport of the attempt that failed: a stdio one tells how its child ended. */
  transport: Transport | undefined;
  /** The end of what a stdio server wrote on stderr. */
  stderr: string;
  phase: "start" | "call";
}

const RESTARTS = "It will be restarted on the next call";
const TLS = /^(CERT_|UNABLE_TO_|SELF_SIGNED_|DEPTH_ZERO_|ERR_TLS_|ERR_SSL_)/;

/** Sorts an error of the SDK, of `fetch` or of a child process into a cause and a fix. */
export function describeFailure(error: unknown, context: FailureContext): Failure {
  const { config, transport, phase } = context;
  const restart = phase === "call" ? RESTARTS : undefined;
  if (error instanceof StartupTimeout) return { reason: error.message, fix: timeoutFix(config), lost: true };
  if (error instanceof McpError && error.code === ErrorCode.RequestTimeout && !isConnectionLoss(error)) {
    const ms = (error.data as { timeout?: unknown } | undefined)?.timeout;
    const reason = typeof ms === "number" ? `no answer within ${ms / 1000} s` : errorMessage(error);
    return { reason, ...(phase === "start" && { fix: timeoutFix(config) }), lost: false };
  }
  const code = errorCode(error);
  if (isStdioConfig(config)) {
    const stdio = transport instanceof StdioTransport ? transport : undefined;
    if (stdio?.oversized) {
      return {
        reason: `it sent a message over the ${formatSize(MAX_STDIO_MESSAGE_BYTES)} limit of MCP stdio messages`,
        fix:
          phase === "call"
            ? `Ask the tool for less (a filter, a range, a page). ${RESTARTS}`
            : "Check the server",
        lost: true,
      };
    }
    if (code === "ENOENT")
      return {
        reason: `command '${config.command}' not found`,
        fix: `Install it, or fix its "command" (a program on PATH or a full path)`,
        lost: true,
      };
    if (code === "EACCES")
      return {
        reason: `command '${config.command}' cannot be run (permission denied)`,
        fix: `Make it executable, or fix its "command"`,
        lost: true,
      };
    if (stdio?.exit) {
      const { code: exitCode, signal } = stdio.exit;
      const how = signal ? `was killed by ${signal}` : `exited with code ${exitCode}`;
      return {
        reason: `the server ${how}${stderrLines(context.stderr)}`,
        fix: restart ?? `Check its "command", "args" and "env"`,
        lost: true,
      };
    }
  }
  if (isHttpConfig(config)) {
    const url = displayUrl(config.url);
    const status = httpStatus(error);
    if (status === 401 || status === 403)
      return {
        reason: `${url} answered ${status} ${STATUS_CODES[status]}`,
        fix: `Check its "headers" (e.g. "Authorization")`,
        lost: false,
      };
    if (status !== undefined)
      return {
        reason: `${url} answered ${status} ${STATUS_CODES[status] ?? ""}`.trimEnd(),
        fix:
          restart ??
          (status < 500
            ? `Check its "url": it must be the server's MCP endpoint (often /mcp, or /sse for older servers)`
            : "Check the server's logs"),
        lost: true,
      };
    if (code === "ECONNREFUSED")
      return {
        reason: `nothing is listening at ${url}`,
        fix: `Start the server, or fix its "url"`,
        lost: true,
      };
    if (code === "ENOTFOUND" || code === "EAI_AGAIN")
      return {
        reason: `the host of ${url} cannot be resolved`,
        fix: `Fix its "url", or check the network`,
        lost: true,
      };
    if (code !== undefined && TLS.test(code))
      return {
        reason: `the TLS certificate of ${url} is not trusted (${code})`,
        fix: `Set NODE_EXTRA_CA_CERTS to your CA bundle, or fix its "url"`,
        lost: true,
      };
    if (code !== undefined)
      return {
        reason: `${url} could not be reached (${code})`,
        fix: restart ?? "Check the network and the proxy (HTTPS_PROXY, NO_PROXY)",
        lost: true,
      };
  }
  if (isConnectionLoss(error))
    return {
      reason: `the server closed the connection${stderrLines(context.stderr)}`,
      ...(restart !== undefined && { fix: restart }),
      lost: true,
    };
  if ((error as { name?: unknown } | undefined)?.name === "ZodError")
    return { reason: "its reply is not valid JSON-RPC", fix: "Check the server", lost: false };
  return {
    reason: `${errorMessage(error)}${phase === "start" ? stderrLines(context.stderr) : ""}`,
    ...(phase === "start" && { fix: "Check its configuration" }),
    lost: false,
  };
}

/** The connection is gone (as opposed to the server answering with an error). */
function isConnectionLoss(error: unknown): boolean {
  if (error instanceof McpError)
    return error.code === ErrorCode.ConnectionClosed && /Connection closed/.test(error.message);
  if (error instanceof StreamableHTTPError || error instanceof SseError) return true;
  return error instanceof Error && (error.message === "Not connected" || error.message === "fetch failed");
}

function timeoutFix(config: McpServerConfig): string {
  if (isHttpConfig(config)) return `Check that the server at ${displayUrl(config.url)} is answering`;
  if (isStdioConfig(config))
    return `If it is downloaded when it starts (npx -y, uvx), check the network and the proxy (HTTPS_PROXY, NODE_EXTRA_CA_CERTS); else check its "command" and "args"`;
  return "Check its transport";
}

/** The HTTP status of a failed request, when the server answered one. */
function httpStatus(error: unknown): number | undefined {
  if (error instanceof StreamableHTTPError || error instanceof SseError) {
    const code = error.code;
    return typeof code === "number" && code >= 100 ? code : undefined;
  }
  return undefined;
}

/**
 * The system error code (`ENOENT`, `ECONNREFUSED`, a TLS code) of an error or of its causes; the
 * SSE transport keeps only the text (`SSE error: TypeError: fetch failed: connect ECONNREFUSED…`).
 */
function errorCode(error: unknown): string | undefined {
  for (let current = error, depth = 0; current instanceof Error && depth < 5; depth++) {
    const { code, cause, errors } = current as { code?: unknown; cause?: unknown; errors?: unknown };
    if (typeof code === "string") return code;
    current = cause ?? (Array.isArray(errors) ? errors[0] : undefined);
  }
  if (error instanceof SseError)
    return /\b(E[A-Z]{3,}|(?:CERT|UNABLE_TO|SELF_SIGNED)_[A-Z_]+)\b/.exec(error.message.slice(0, 1000))?.[1];
  return undefined;
}

/** The last lines of stderr, as ` (stderr: a | b)`, or nothing. */
function stderrLines(stderr: string): string {
  const lines = stderr
    .split(/\r?\n/)
    .map((line) => line.trim())
    .filter((line) => line !== "")
    .slice(-3);
  if (lines.length === 0) return "";
  const text = lines.join(" | ");
  return ` (stderr: ${text.length > 300 ? `…${text.slice(-300)}` : text})`;
}

/** A URL without credentials or query, which may carry tokens. */
export function displayUrl(url: string): string {
  try {
    const { origin, pathname } = new URL(url);
    return `${origin}${pathname}`;
  } catch {
    return url;
  }
}
