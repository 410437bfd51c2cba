// A protected MCP server with its own OAuth 2.1 authorization server, on 127.0.0.1, for tests:
// protected resource and authorization server metadata, dynamic client registration, an authorize
// endpoint that redirects to the client's callback at once (as a browser would once the person
// allowed it), and a token endpoint (authorization code with PKCE, refresh, client credentials with
// a secret or a private_key_jwt assertion). Knobs make it misbehave in the ways users meet.
import { createHash, createPublicKey, randomBytes, verify } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { afterEach } from "vitest";

export interface OAuthTestServer {
  /** The MCP endpoint, `http://127.0.0.1:<port>/mcp`. */
  url: string;
  origin: string;
  /** Every request to the authorization server: path, query or form. */
  log: { path: string; params: Record<string, string>; authorization?: string }[];
  /** Every access and refresh token issued. */
  issued: string[];
  /** Makes every access token issued so far unusable (as when it expires). */
  expireAccessTokens(): void;
  knobs: Knobs;
}

interface Knobs {
  /** The `resource` of the protected resource metadata. Default the MCP endpoint. */
  resource?: string;
  /** The `issuer` of the authorization server metadata. Default its own URL (the origin). */
  issuer?: string;
  /**
   * False: no protected resource metadata (404), as a 2025-03-26 server: the client falls back to
   * the MCP server's origin as its authorization server.
   */
  resourceMetadata?: false;
  /** Replaces the authorization server metadata. */
  metadata?: Record<string, unknown>;
  /** The `redirect_uris` the registration answers with. Default those asked for. */
  registeredRedirects?: string[];
  /** Refuse refresh tokens (`invalid_grant`), as when they expired or were revoked. */
  refuseRefresh?: boolean;
  /** A client registered beforehand, for `client_credentials`. */
  client?: { id: string; secret?: string; publicKeyPem?: string };
}

const servers: Server[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

const b64url = (data: Buffer | string) => Buffer.from(data).toString("base64url");

export async function startOAuthServer(knobs: Knobs = {}): Promise<OAuthTestServer> {
  const log: OAuthTestServer["log"] = [];
  const issued: string[] = [];
  const access = new Set<string>();
  const refresh = new Set<string>();
  const clients = new Map<string, { redirects: string[] }>();
  const codes = new Map<string, { challenge: string; redirect: string; resource?: string }>();
  let origin = "";

  const send = (res: ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
  };
  const tokens = (res: ServerResponse, scope: string | undefined) => {
    const token = b64url(randomBytes(24));
    const renewal = b64url(randomBytes(24));
    access.add(token);
    refresh.add(renewal);
    issued.push(token, renewal);
    send(res, 200, {
      access_token: token,
      token_type: "Bearer",
      expires_in: 3600,
      refresh_token: renewal,
      ...(scope && { scope }),
    });
  };

  async function handle(req: IncomingMessage, res: ServerResponse, body: string) {
    const url = new URL(req.url ?? "/", origin);
    const form = Object.fromEntries(new URLSearchParams(body));
    const params = req.method === "GET" ? Object.fromEntries(url.searchParams) : form;
    const path = url.pathname;
    if (path === "/mcp") return mcp(req, res, body);
    log.push({
      path,
      params,
      ...(req.headers.authorization && { authorization: req.headers.authorization }),
    });
    if (path === "/.well-known/oauth-protected-resource/mcp" && knobs.resourceMetadata !== false) {
      return send(res, 200, {
        resource: knobs.resource ?? `${origin}/mcp`,
        authorization_servers: [origin],
        scopes_supported: ["tools:read"],
      });
    }
    if (path === "/.well-known/oauth-authorization-server") {
      return send(
        res,
        200,
        knobs.metadata ?? {
          issuer: knobs.issuer ?? origin,
          authorization_endpoint: `${origin}/authorize`,
          token_endpoint: `${origin}/token`,
          registration_endpoint: `${origin}/register`,
          response_types_supported: ["code"],
          grant_types_supported: ["authorization_code", "refresh_token", "client_credentials"],
          code_challenge_methods_supported: ["S256"],
          token_endpoint_auth_methods_supported: ["none", "client_secret_basic", "private_key_jwt"],
          scopes_supported: ["tools:read", "offline_access"],
        },
      );
    }
    if (path === "/register" && req.method === "POST") {
      const asked = JSON.parse(body) as { redirect_uris?: string[] };
      const id = `client-${clients.size + 1}`;
      clients.set(id, { redirects: asked.redirect_uris ?? [] });
      return send(res, 201, {
        ...asked,
        client_id: id,
        redirect_uris: knobs.registeredRedirects ?? asked.redirect_uris,
      });
    }
    if (path === "/authorize") {
      const { client_id, redirect_uri, code_challenge, code_challenge_method, state, resource } = params;
      const client = clients.get(client_id ?? "");
      if (
        !client ||
        !redirect_uri ||
        !client.redirects.includes(redirect_uri) ||
        code_challenge_method !== "S256"
      )
        return send(res, 400, { error: "invalid_request" });
      const code = b64url(randomBytes(16));
      codes.set(code, {
        challenge: code_challenge ?? "",
        redirect: redirect_uri,
        ...(resource && { resource }),
      });
      const back = new URL(redirect_uri);
      back.searchParams.set("code", code);
      if (state) back.searchParams.set("state", state);
      res.writeHead(302, { location: back.toString() }).end();
      return;
    }
    if (path === "/token" && req.method === "POST") return token(req, res, form);
    send(res, 404, { error: "not_found" });
  }

  function token(req: IncomingMessage, res: ServerResponse, form: Record<string, string>) {
    if (form.grant_type === "authorization_code") {
      const grant = codes.get(form.code ?? "");
      codes.delete(form.code ?? "");
      const challenge = b64url(
        createHash("sha256")
          .update(form.code_verifier ?? "")
          .digest(),
      );
      if (
        !grant ||
        grant.challenge !== challenge ||
        grant.redirect !== form.redirect_uri ||
        grant.resource !== form.resource
      )
        return send(res, 400, {
          error: "invalid_grant",
          error_description: "code, verifier or resource mismatch",
        });
      return tokens(res, "tools:read");
    }
    if (form.grant_type === "refresh_token") {
      if (knobs.refuseRefresh || !refresh.has(form.refresh_token ?? ""))
        return send(res, 400, { error: "invalid_grant", error_description: "The refresh token has expired" });
      return tokens(res, "tools:read");
    }
    if (form.grant_type === "client_credentials" && knobs.client) {
      const { id, secret, publicKeyPem } = knobs.client;
      const basic = req.headers.authorization?.startsWith("Basic ")
        ? Buffer.from(req.headers.authorization.slice(6), "base64").toString()
        : undefined;
      const ok = secret ? basic === `${id}:${secret}` : assertionValid(form, id, publicKeyPem ?? "", origin);
      if (!ok)
        return send(res, 401, { error: "invalid_client", error_description: "Client authentication failed" });
      return tokens(res, form.scope);
    }
    send(res, 400, { error: "unsupported_grant_type" });
  }

  async function mcp(req: IncomingMessage, res: ServerResponse, body: string) {
    const bearer = req.headers.authorization?.replace(/^Bearer /, "") ?? "";
    if (!access.has(bearer)) {
      res
        .writeHead(401, {
          "www-authenticate": `Bearer resource_metadata="${origin}/.well-known/oauth-protected-resource/mcp"`,
          "content-type": "application/json",
        })
        .end(JSON.stringify({ error: "invalid_token" }));
      return;
    }
    const server = new McpServer({ name: "protected", version: "1.0.0" });
    server.registerTool("whoami", { description: "Says who is signed in" }, () => ({
      content: [{ type: "text", text: "signed in as ada" }],
    }));
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    res.on("close", () => void server.close());
    await server.connect(transport);
    await transport.handleRequest(req, res, body ? JSON.parse(body) : undefined);
  }

  const http = createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on("data", (part: Buffer) => parts.push(part));
    req.on("end", () => {
      handle(req, res, Buffer.concat(parts).toString()).catch((error: unknown) => {
        if (!res.headersSent) send(res, 500, { error: "server_error", error_description: String(error) });
      });
    });
  });
  servers.push(http);
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  const address = http.address();
  origin = `http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}`;
  return {
    url: `${origin}/mcp`,
    origin,
    log,
    issued,
    expireAccessTokens: () => access.clear(),
    knobs,
  };
}

/** A `private_key_jwt` client assertion (RFC 7523): signed by the client's key, for this server. */
function assertionValid(
  form: Record<string, string>,
  id: string,
  publicKeyPem: string,
  origin: string,
): boolean {
  if (form.client_assertion_type !== "urn:ietf:params:oauth:client-assertion-type:jwt-bearer") return false;
  const [header, payload, signature] = (form.client_assertion ?? "").split(".");
  if (!header || !payload || !signature) return false;
  const { alg } = JSON.parse(Buffer.from(header, "base64url").toString()) as { alg: string };
  const claims = JSON.parse(Buffer.from(payload, "base64url").toString()) as Record<string, unknown>;
  const key = createPublicKey(publicKeyPem);
  const digest = alg === "EdDSA" ? null : `sha${alg.slice(2)}`;
  const signed = verify(
    digest,
    Buffer.from(`${header}.${payload}`),
    { key, dsaEncoding: "ieee-p1363" },
    Buffer.from(signature, "base64url"),
  );
  return signed && claims.iss === id && claims.sub === id && claims.aud === origin;
}
