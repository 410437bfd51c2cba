import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";
import { StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  InvalidClientError,
  OAuthError,
  UnauthorizedClientError,
} from "@modelcontextprotocol/sdk/server/auth/errors.js";
import { errorMessage } from "../core/errors.js";
import { displayUrl } from "./failure.js";

/** A sign-in that cannot happen now, or failed: one-line `reason` and `fix`, as in `StartFailure`. */
export class SignInFailure extends Error {
  constructor(
    readonly reason: string,
    readonly fix: string,
  ) {
    super(reason);
  }
}

/** A sign-in waiting for the browser that was cancelled (the caller's signal aborted). */
export class SignInCancelled extends SignInFailure {}

/** What a sign-in's messages name. */
export interface SignInContext {
  server: string;
  /** The MCP server's URL. */
  url: string;
  /** The last authorization server URL asked, named when its answer is unusable. */
  lastAsked: string;
  /** The scope the server asked for in a 403 `insufficient_scope`, if any. */
  wantedScope: string;
}

/**
 * One line for an error of a sign-in, ours or the MCP SDK's (which has no classes for some: those
 * are read from their message), or undefined when the error is not one.
 */
export function explainSignInError(
  error: unknown,
  { server, url, lastAsked, wantedScope }: SignInContext,
): { reason: string; fix: string } | undefined {
  const login = `agentloop mcp login ${server}`;
  if (error instanceof SignInFailure) return error;
  if (error instanceof UnauthorizedError)
    return { reason: `${displayUrl(url)} still asks for a sign-in after 3 of them`, fix: "Check the server" };
  if (error instanceof OAuthError) {
    const detail = oneLine(error.message).replace(/^HTTP (\d+): .*/, "HTTP $1");
    const client = error instanceof InvalidClientError || error instanceof UnauthorizedClientError;
    return {
      reason: `the authorization server refused (${error.errorCode}${detail ? `: ${detail}` : ""}) at ${displayUrl(lastAsked)}`,
      fix: client
        ? `Check its "oauth" settings (clientId, clientSecret, privateKeyFile)`
        : `Run \`${login}\``,
    };
  }
  if (
    error instanceof StreamableHTTPError &&
    /after (trying upscoping|successful authentication)/.test(error.message)
  ) {
    const scope = wantedScope ? ` (scope '${wantedScope}')` : "";
    return {
      reason: `${displayUrl(url)} still refuses (HTTP ${error.code}) after a sign-in with what it asked for${scope}`,
      fix: `Sign in as someone allowed to use it with \`${login}\``,
    };
  }
  const { name, issues } = error as { name?: unknown; issues?: { path: PropertyKey[]; message: string }[] };
  if (name === "ZodError" && Array.isArray(issues) && lastAsked !== "") {
    const first = issues[0];
    const where = first?.path.length ? `${first.path.map(String).join(".")}: ` : "";
    return {
      reason: `the OAuth answer of ${displayUrl(lastAsked)} is malformed (${where}${first?.message ?? "invalid"})`,
      fix: "Check the authorization server",
    };
  }
  const message = errorMessage(error);
  const mismatch = /^Protected resource (\S+) does not match expected (\S+)/.exec(message);
  if (mismatch)
    return {
      reason: `its OAuth metadata names another resource (${mismatch[1]}, not ${mismatch[2]}): agentloop refuses to sign in for it`,
      fix: `Check its "url", or the server's protected resource metadata`,
    };
  const moved =
    /^OAuth client information is bound to authorization server (\S+) and is not presented to (\S+?)\.? /.exec(
      message,
    );
  if (moved)
    return {
      reason: `it now names the authorization server ${moved[2]}, not ${moved[1]}, where its client signed in before`,
      fix: `If the server moved there, run \`${login}\``,
    };
  if (message.startsWith("Incompatible auth server"))
    return {
      reason: `its authorization server ${message.replace(/^Incompatible auth server: /, "")}`,
      fix: `Register a client with it and set "oauth": {"clientId": …} in the config`,
    };
  return undefined;
}

/** Text from a server as one short line. */
export function oneLine(text: string): string {
  const line = text.replace(/\s+/g, " ").trim();
  return line.length > 200 ? `${line.slice(0, 200)}…` : line;
}
