import { createPrivateKey, type KeyObject, randomBytes } from "node:crypto";
import { readFile } from "node:fs/promises";
import {
  type AddClientAuthentication,
  extractWWWAuthenticateParams,
  isHttpsUrl,
  type OAuthClientProvider,
  type OAuthDiscoveryState,
} from "@modelcontextprotocol/sdk/client/auth.js";
import { createPrivateKeyJwtAuth } from "@modelcontextprotocol/sdk/client/auth-extensions.js";
import type {
  OAuthClientInformationMixed,
  OAuthClientMetadata,
  OAuthTokens,
} from "@modelcontextprotocol/sdk/shared/auth.js";
import type { FetchLike } from "@modelcontextprotocol/sdk/shared/transport.js";
import { errorMessage } from "../core/errors.js";
import type { McpOAuthConfig } from "./config.js";
import { displayUrl } from "./failure.js";
import { LoopbackCallback } from "./oauth-browser.js";
import { explainSignInError, SignInCancelled, SignInFailure } from "./oauth-errors.js";
import { issuerProblem } from "./oauth-issuer.js";
import { type McpOAuthRecord, type McpTokenStore, TokenStoreError } from "./oauth-store.js";

/** How sign-ins happen in this process. */
export interface SignInSettings {
  store: McpTokenStore;
  /**
   * A person can sign in now: opens the authorization URL in a browser; `message` is a line to
   * show with it. Absent: a sign-in that needs a person fails, naming `agentloop mcp login`.
   */
  openUrl?: (url: string, message: string) => void | Promise<void>;
}

/** Stands in for the callback before a person can sign in; never listened on. */
const NO_CALLBACK = "http://127.0.0.1/callback";

/**
 * The MCP SDK's `OAuthClientProvider` for one remote server: the SDK's `auth()` does discovery,
 * registration, PKCE, scope selection, the resource check, refresh and the token requests; this
 * keeps the results in a `McpTokenStore`, opens the browser and receives the code on a loopback
 * callback. Tokens never appear in its messages.
 */
export class McpOAuthProvider implements OAuthClientProvider {
  readonly clientMetadataUrl: string | undefined;
  addClientAuthentication?: AddClientAuthentication;
  private readonly grant: NonNullable<McpOAuthConfig["grant"]>;
  private readonly key: string;
  private record: McpOAuthRecord;
  private callback: LoopbackCallback | undefined;
  private listening: Promise<void> | undefined;
  private pending: Promise<string> | undefined;
  private verifier = "";
  private expectedState = "";
  private serverScopes: string[] | undefined;
  /** Why the next sign-in is needed, for its messages. */
  private why: "new" | "expired" | "refused" | "scope" = "new";
  private wantedScope = "";
  /**
   * The authorization server URL asked last, named when its answer is unusable; empty once the
   * MCP server itself was asked since (its answers are not OAuth's).
   */
  private lastAsked = "";

  constructor(
    readonly server: string,
    readonly url: string,
    private readonly config: McpOAuthConfig,
    private readonly settings: SignInSettings,
  ) {
    this.grant = config.grant ?? "authorization_code";
    this.key = signInKey(url, config);
    this.record = { url };
    this.clientMetadataUrl = isHttpsUrl(config.clientId) ? config.clientId : undefined;
  }

  /** Reads the stored sign-in (and the private key). Rejects with a `SignInFailure`. */
  async load(): Promise<void> {
    try {
      this.record = (await this.settings.store.load(this.key)) ?? { url: this.url };
    } catch (error) {
      if (!(error instanceof TokenStoreError)) throw error;
      throw new SignInFailure(error.reason, `${error.fix}, then run \`agentloop mcp login ${this.server}\``);
    }
    if (this.record.tokens) this.why = "expired";
    else if (this.record.refused) this.why = "refused";
    const { clientId, privateKeyFile } = this.config;
    if (privateKeyFile !== undefined && clientId !== undefined && !this.addClientAuthentication) {
      this.addClientAuthentication = await privateKeyJwt(clientId, privateKeyFile);
    }
  }

  /** Every request to the server and its authorization server goes through here. */
  readonly fetch: FetchLike = async (input, init) => {
    const url = String(input);
    this.lastAsked = url.startsWith(this.url) ? "" : url;
    const response = await fetch(input, init);
    if (response.status === 401 || response.status === 403) await this.challenged(response);
    return response;
  };

  get redirectUrl(): string | undefined {
    if (this.grant === "client_credentials") return undefined;
    return this.callback?.url ?? registeredCallback(this.record.client) ?? NO_CALLBACK;
  }

  get clientMetadata(): OAuthClientMetadata {
    const code = this.grant === "authorization_code";
    const { clientSecret, privateKeyFile, scope } = this.config;
    return {
      client_name: "agentloop",
      redirect_uris: code ? [this.redirectUrl as string] : [],
      grant_types: code ? ["authorization_code", "refresh_token"] : ["client_credentials"],
      response_types: code ? ["code"] : [],
      token_endpoint_auth_method: privateKeyFile
        ? "private_key_jwt"
        : clientSecret
          ? "client_secret_basic"
          : "none",
      ...(scope && { scope }),
    };
  }

  state(): string {
    this.expectedState = randomBytes(16).toString("base64url");
    return this.expectedState;
  }

  clientInformation(): OAuthClientInformationMixed | undefined {
    // Without a person and without tokens, nothing can come of this sign-in: say so before registering.
    if (this.grant === "authorization_code" && !this.settings.openUrl && !this.record.tokens) {
      throw this.personNeeded();
    }
    const { clientId, clientSecret } = this.config;
    if (clientId === undefined || this.clientMetadataUrl) return this.record.client;
    // A configured client, bound to the authorization server that first accepted it.
    const bound = this.record.client?.client_id === clientId ? this.record.client.issuer : undefined;
    return {
      client_id: clientId,
      ...(clientSecret !== undefined && { client_secret: clientSecret }),
      ...(bound !== undefined && { issuer: bound }),
    };
  }

  async saveClientInformation(info: OAuthClientInformationMixed): Promise<void> {
    const { clientId } = this.config;
    if (clientId !== undefined && !this.clientMetadataUrl) {
      if (info.client_id !== clientId) {
        throw new SignInFailure(
          `it now sends agentloop to the authorization server ${info.issuer}, not to ${this.record.client?.issuer}, where client '${clientId}' signed in before`,
          `If the server moved there, run \`agentloop mcp login ${this.server}\``,
        );
      }
      // Only the binding is kept: the secret stays in the config.
      this.record.client = { client_id: clientId, ...(info.issuer !== undefined && { issuer: info.issuer }) };
    } else {
      const callbacks = "redirect_uris" in info ? info.redirect_uris : [];
      const elsewhere = callbacks.find((uri) => !isLoopback(uri));
      if (elsewhere !== undefined) {
        throw new SignInFailure(
          `its authorization server registered agentloop with the callback ${elsewhere}, which is not on this machine, so the sign-in would go elsewhere`,
          "Check the authorization server: agentloop only receives sign-ins on 127.0.0.1",
        );
      }
      this.record.client = info;
    }
    await this.persist();
  }

  tokens(): OAuthTokens | undefined {
    return this.record.tokens;
  }

  async saveTokens(tokens: OAuthTokens): Promise<void> {
    this.record.tokens = tokens;
    this.record.refused = undefined;
    this.why = "expired";
    await this.persist();
  }

  async redirectToAuthorization(authorizationUrl: URL): Promise<void> {
    const open = this.settings.openUrl;
    if (!open || !this.callback) throw this.personNeeded();
    const scope = authorizationUrl.searchParams.get("scope");
    // Offline access where the authorization server offers it: a refresh token outlives this run.
    if (
      scope &&
      this.serverScopes?.includes("offline_access") &&
      !scope.split(" ").includes("offline_access")
    ) {
      authorizationUrl.searchParams.set("scope", `${scope} offline_access`);
      if (!authorizationUrl.searchParams.has("prompt"))
        authorizationUrl.searchParams.set("prompt", "consent");
    }
    this.pending = this.callback.wait(this.expectedState);
    this.pending.catch(() => {});
    const name = `MCP server '${this.server}'`;
    const message = {
      new: `sign in to ${name} in your browser`,
      expired: `the sign-in to ${name} has expired; signing in again in your browser`,
      refused: `the sign-in to ${name} has expired; signing in again in your browser`,
      scope: `${name} asks for more permissions (scope '${this.wantedScope}'): sign in again in your browser`,
    }[this.why];
    await open(authorizationUrl.toString(), message);
  }

  /** A sign-in is under way in the browser: its code has not been taken yet. */
  get awaitingBrowser(): boolean {
    return this.pending !== undefined;
  }

  saveCodeVerifier(verifier: string): void {
    this.verifier = verifier;
  }

  codeVerifier(): string {
    return this.verifier;
  }

  prepareTokenRequest(scope?: string): URLSearchParams | undefined {
    if (this.grant !== "client_credentials") return undefined;
    const params = new URLSearchParams({ grant_type: "client_credentials" });
    if (scope) params.set("scope", scope);
    return params;
  }

  async invalidateCredentials(scope: "all" | "client" | "tokens" | "verifier" | "discovery"): Promise<void> {
    if (scope === "all" || scope === "tokens") {
      if (this.record.tokens?.refresh_token !== undefined) {
        this.why = "refused";
        this.record.refused = true; // so the next run says so too, though no token is left
      }
      this.record.tokens = undefined;
    }
    if ((scope === "all" || scope === "client") && this.config.clientId === undefined)
      this.record.client = undefined;
    if (scope === "all" || scope === "verifier") this.verifier = "";
    await this.persist();
  }

  saveDiscoveryState(state: OAuthDiscoveryState): void {
    // Called by the SDK's auth() after every discovery, before anything is sent to the server found.
    const problem = issuerProblem(state);
    if (problem) throw problem;
    this.serverScopes = state.authorizationServerMetadata?.scopes_supported;
  }

  /**
   * The code of the sign-in under way in the browser, once the person has finished it; undefined
   * when none is under way. Rejects with a `SignInFailure` (refused, timed out), a
   * `SignInCancelled` when `signal` aborts.
   */
  async takeCode(signal?: AbortSignal): Promise<string | undefined> {
    const pending = this.pending;
    this.pending = undefined;
    if (!pending) return undefined;
    const again = `Run \`agentloop mcp login ${this.server}\` to try again`;
    try {
      if (!signal) return await pending;
      let onAbort = () => {};
      const aborted = new Promise<never>((_, reject) => {
        onAbort = () => reject(new SignInCancelled("the sign-in was cancelled", again));
        if (signal.aborted) onAbort();
        else signal.addEventListener("abort", onAbort, { once: true });
      });
      return await Promise.race([pending, aborted]).finally(() =>
        signal.removeEventListener("abort", onAbort),
      );
    } catch (error) {
      if (error instanceof SignInCancelled) throw error;
      throw new SignInFailure(errorMessage(error), again);
    }
  }

  /** One line for an error of a sign-in (the SDK's or ours), or undefined when it is not one. */
  explain(error: unknown): { reason: string; fix: string } | undefined {
    const { server, url, lastAsked, wantedScope } = this;
    return explainSignInError(error, { server, url, lastAsked, wantedScope });
  }

  /** Closes the loopback callback. */
  async close(): Promise<void> {
    this.pending = undefined;
    await this.callback?.close();
  }

  /** The server answered 401 or 403: a sign-in may follow, which needs the callback first. */
  private async challenged(response: Response): Promise<void> {
    const { scope, error } = extractWWWAuthenticateParams(response);
    if (response.status === 403 && error === "insufficient_scope") {
      this.why = "scope";
      this.wantedScope = scope ?? "";
      // A refresh keeps the old scopes: more of them take a new authorization.
      if (this.record.tokens?.refresh_token !== undefined) {
        const { refresh_token: _dropped, ...tokens } = this.record.tokens;
        this.record.tokens = tokens;
      }
    }
    if (this.grant === "authorization_code" && this.settings.openUrl) await this.listen();
  }

  private listen(): Promise<void> {
    this.listening ??= (async () => {
      const registered = registeredCallback(this.record.client);
      try {
        this.callback = await LoopbackCallback.listen(registered ? Number(new URL(registered).port) : 0);
      } catch (error) {
        this.listening = undefined;
        throw new SignInFailure(
          `agentloop cannot listen on 127.0.0.1 for the sign-in (${(error as NodeJS.ErrnoException).code ?? errorMessage(error)})`,
          "Check the local firewall",
        );
      }
      // A registration made for another callback port would be refused: register again.
      const dynamic = this.record.client && this.record.client.client_id !== this.config.clientId;
      if (registered && registered !== this.callback.url && dynamic) this.record.client = undefined;
    })();
    return this.listening;
  }

  private personNeeded(): SignInFailure {
    const url = displayUrl(this.url);
    const fix = `Run \`agentloop mcp login ${this.server}\` in a terminal`;
    switch (this.why) {
      case "new":
        return new SignInFailure(`${url} needs a sign-in (OAuth) and no token is stored`, fix);
      case "scope":
        return new SignInFailure(
          `${url} asks for more permissions (scope '${this.wantedScope}') than the stored sign-in has`,
          fix,
        );
      default:
        return new SignInFailure(
          `the sign-in to ${url} has expired${this.why === "refused" ? " (the authorization server refused the refresh token)" : ""}`,
          fix,
        );
    }
  }

  private async persist(): Promise<void> {
    try {
      await this.settings.store.save(this.key, this.record);
    } catch (error) {
      if (!(error instanceof TokenStoreError)) throw error;
      throw new SignInFailure(error.reason, error.fix);
    }
  }
}

/** Where a server's sign-in is stored: its URL and the client configured for it. */
export function signInKey(url: string, config: McpOAuthConfig): string {
  return JSON.stringify([url, config.clientId ?? null, config.grant ?? "authorization_code"]);
}

/** `private_key_jwt` client authentication (RFC 7523) with the key of `file`, signed by the SDK. */
async function privateKeyJwt(clientId: string, file: string): Promise<AddClientAuthentication> {
  let key: KeyObject;
  try {
    key = createPrivateKey(await readFile(file, "utf8"));
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const why = code === "ENOENT" || code === "EACCES" || code === "EISDIR" ? code : "not a PEM private key";
    throw new SignInFailure(
      `its private key ${file} cannot be read (${why})`,
      `Check its "oauth.privateKeyFile"`,
    );
  }
  const curves: Record<string, string> = { prime256v1: "ES256", secp384r1: "ES384", secp521r1: "ES512" };
  const type = key.asymmetricKeyType;
  const alg =
    type === "rsa"
      ? "RS256"
      : type === "ed25519"
        ? "EdDSA"
        : type === "ec"
          ? curves[key.asymmetricKeyDetails?.namedCurve ?? ""]
          : undefined;
  if (alg === undefined) {
    throw new SignInFailure(
      `its private key ${file} is of a kind agentloop cannot sign with (${type})`,
      "Use an RSA, EC (P-256, P-384, P-521) or Ed25519 key",
    );
  }
  const privateKey = key.export({ format: "jwk" }) as Record<string, unknown>;
  return createPrivateKeyJwtAuth({ issuer: clientId, subject: clientId, privateKey, alg });
}

/** The loopback callback a stored registration was made for. */
function registeredCallback(client: OAuthClientInformationMixed | undefined): string | undefined {
  const uri = client && "redirect_uris" in client ? client.redirect_uris[0] : undefined;
  return uri !== undefined && isLoopback(uri) && new URL(uri).port !== "" ? uri : undefined;
}

function isLoopback(uri: string): boolean {
  try {
    const { protocol, hostname } = new URL(uri);
    return protocol === "http:" && ["127.0.0.1", "localhost", "[::1]"].includes(hostname);
  } catch {
    return false;
  }
}
