import { createHash, timingSafeEqual } from "node:crypto";
import type { MiddlewareHandler } from "hono";
import { cors } from "hono/cors";
import { echoed } from "../core/redact.js";
import { errorResponse } from "./errors.js";
import type { ServerEnv } from "./request-log.js";

/**
 * The middlewares that refuse a request before it reaches a route, each with an OpenAI error
 * body: a foreign `Host` (DNS rebinding), a foreign `Origin` (cross-site requests), a missing or
 * wrong API key, a body that is not JSON.
 */

/** Refuses a `Host` whose name (without the port; IPv6 in brackets) is not in `hosts` (403). */
export function hostGuard(hosts: readonly string[]): MiddlewareHandler {
  const allowed = new Set(hosts.map((h) => h.toLowerCase()));
  const list = [...allowed].join(", ");
  return async (c, next) => {
    const host = new URL(c.req.url).hostname;
    if (allowed.has(host)) return next();
    const message = `Host '${echoed(host)}' is not allowed: this server answers requests for ${list} (a reverse proxy must send one of them as Host).`;
    return errorResponse(403, message, "host_not_allowed");
  };
}

/**
 * Refuses browser requests from another origin (403), so a web page elsewhere cannot run the
 * agent: an `Origin` other than the server's own (same host and port as `Host`) and not in
 * `corsOrigins`, or, without `Origin`, `Sec-Fetch-Site: cross-site` or `same-site` (an image or
 * script tag), except navigations (a link to the chat page). Clients that are not browsers send
 * neither header. Allowed origins get CORS headers and their preflight answered (Hono's `cors`);
 * `"*"` allows every origin.
 */
export function originGuard(corsOrigins: readonly string[] = []): MiddlewareHandler {
  const any = corsOrigins.includes("*");
  const allowCors =
    corsOrigins.length > 0
      ? cors({
          origin: any ? "*" : [...corsOrigins],
          allowMethods: ["GET", "POST", "OPTIONS"],
          maxAge: 600,
        })
      : undefined;
  const forbidden = (what: string) =>
    errorResponse(
      403,
      `Cross-origin request refused (${what}): start the server with --cors <origin> (createApp's corsOrigins) to allow a web app on another origin.`,
      "origin_not_allowed",
    );
  return async (c, next) => {
    const origin = c.req.header("origin");
    if (origin === undefined) {
      const site = c.req.header("sec-fetch-site");
      const crossSite = site === "cross-site" || site === "same-site";
      if (crossSite && c.req.header("sec-fetch-mode") !== "navigate")
        return forbidden(`Sec-Fetch-Site ${site}`);
      return next();
    }
    if (sameHost(origin, c.req.url)) return next();
    if (allowCors && (any || corsOrigins.includes(origin))) return allowCors(c, next);
    return forbidden(`Origin ${origin.slice(0, 200)}`);
  };
}

/** Whether a serialised origin names the host and port the request was sent to (the scheme is not compared: a TLS proxy may front the server). */
function sameHost(origin: string, url: string): boolean {
  try {
    return new URL(origin).host === new URL(url).host;
  } catch {
    return false; // "null" (a sandboxed frame, a file) or garbage
  }
}

const digest = (value: string) => createHash("sha256").update(value).digest();

/** A key the server takes: the SHA-256 of its text, and the client it names (none for a server's single key). */
export interface AcceptedKey {
  sha256: Buffer;
  owner?: string;
}

/** The accepted key of a key's text. */
export const acceptedKey = (key: string, owner?: string): AcceptedKey => ({
  sha256: digest(key),
  ...(owner !== undefined && { owner }),
});

/**
 * Requires `Authorization: Bearer <key>` with one of `keys` (401 otherwise), and sets the
 * request's `owner` to that key's. The scheme is case-insensitive and may be followed by several
 * spaces (RFC 9110); the key is compared in constant time with every accepted one.
 */
export function bearerKey(keys: readonly AcceptedKey[]): MiddlewareHandler<ServerEnv> {
  const which = keys.some((key) => key.owner !== undefined) ? "your API key" : "AGENTLOOP_API_KEY";
  return async (c, next) => {
    const match = /^Bearer\s+(.+)$/i.exec(c.req.header("authorization") ?? "");
    if (match?.[1]) {
      // Digests have a fixed length, and every key is compared, so the time says nothing of which matched or how far.
      const sent = digest(match[1].trim());
      let found: AcceptedKey | undefined;
      for (const key of keys) if (timingSafeEqual(sent, key.sha256)) found = key;
      if (found) {
        if (found.owner !== undefined) c.set("owner", found.owner);
        return next();
      }
    }
    return errorResponse(
      401,
      `Invalid or missing API key: send Authorization: Bearer <${which}>.`,
      "invalid_api_key",
      { headers: { "www-authenticate": "Bearer" } },
    );
  };
}

const JSON_TYPE = /^application\/(?:[\w.+-]+\+)?json\s*(?:;|$)/i;

/**
 * Refuses a POST whose body is not declared JSON (415). Besides telling the client what to send,
 * this keeps pages elsewhere out: a JSON content type cannot be sent cross-origin without a
 * CORS preflight.
 */
export const jsonBody: MiddlewareHandler = async (c, next) => {
  if (c.req.method !== "POST" || JSON_TYPE.test(c.req.header("content-type") ?? "")) return next();
  // No body at all (`curl -X POST .../resume`): nothing to declare. Cross-origin pages are kept out by the origin guard.
  const empty =
    c.req.header("content-type") === undefined &&
    (c.req.header("content-length") ?? (c.req.header("transfer-encoding") ? "chunked" : "0")) === "0";
  if (empty) return next();
  return errorResponse(
    415,
    "Send the request body as JSON with Content-Type: application/json.",
    "invalid_content_type",
  );
};
