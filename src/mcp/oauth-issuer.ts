import type { OAuthDiscoveryState } from "@modelcontextprotocol/sdk/client/auth.js";
import { SignInFailure } from "./oauth-errors.js";

/**
 * The check the MCP SDK (1.32) leaves out (RFC 8414 section 3.3, OpenID Connect Discovery 4.3):
 * authorization server metadata whose `issuer` is not the URL it was fetched for must not be
 * used, or one server could pass itself off as another (a mix-up attack). A `SignInFailure`
 * naming both URLs, or undefined when the metadata may be used.
 *
 * An authorization server the MCP server advertised (RFC 9728) must be named exactly, give or
 * take a trailing `/`. Without one (the 2025-03-26 fallback) the MCP server's origin stands in for
 * it, guessed by the client rather than named by anyone, and servers of that era give issuers with
 * a path (the MCP conformance suite's `/oauth`): there the issuer must be on that origin.
 */
export function issuerProblem(state: OAuthDiscoveryState): SignInFailure | undefined {
  const issuer = state.authorizationServerMetadata?.issuer;
  if (issuer === undefined) return undefined;
  const asked = String(state.authorizationServerUrl);
  const advertised = (state.resourceMetadata?.authorization_servers?.length ?? 0) > 0;
  const fits = advertised ? sameUrl(issuer, asked) : sameOrigin(issuer, asked);
  if (fits) return undefined;
  return new SignInFailure(
    `the authorization server metadata fetched for ${asked} names another issuer, ${issuer}: agentloop refuses to sign in with it`,
    `Check the authorization server's "issuer"`,
  );
}

function sameUrl(a: string, b: string): boolean {
  const [x, y] = [parsed(a)?.href ?? a, parsed(b)?.href ?? b].map((url) => url.replace(/\/$/, ""));
  return x === y;
}

function sameOrigin(a: string, b: string): boolean {
  const [x, y] = [parsed(a), parsed(b)];
  return x !== undefined && y !== undefined && x.origin === y.origin;
}

function parsed(url: string): URL | undefined {
  try {
    return new URL(url);
  } catch {
    return undefined;
  }
}
