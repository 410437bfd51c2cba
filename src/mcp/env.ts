import { DEFAULT_INHERITED_ENV_VARS } from "@modelcontextprotocol/sdk/client/stdio.js";

/**
 * Variables a stdio server inherits from this process: the SDK's minimal set (HOME, PATH, SHELL,
 * TERM, USER, LOGNAME; the Windows equivalents), plus what launchers such as `npx -y` and `uvx`
 * need to download and run a server behind a proxy or a company CA: proxies, CA bundles, npm's
 * registry, cache and proxy settings, version-manager homes, XDG directories, locale and temp dirs.
 */
const INHERITED = new RegExp(
  `^(${[
    ...DEFAULT_INHERITED_ENV_VARS,
    "PATHEXT",
    "COMSPEC",
    "WINDIR",
    "PROGRAMDATA",
    "(HTTP|HTTPS|ALL|NO)_PROXY",
    "NODE_USE_ENV_PROXY",
    "NODE_EXTRA_CA_CERTS",
    "SSL_CERT_(FILE|DIR)",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "NPM_CONFIG_(REGISTRY|@[^:]+:REGISTRY|CACHE|PREFIX|USERCONFIG|GLOBALCONFIG|CAFILE|STRICT_SSL|PROXY|HTTPS_PROXY|NOPROXY|OFFLINE|PREFER_OFFLINE|PREFER_ONLINE|FETCH_RETRIES|FETCH_TIMEOUT|UPDATE_NOTIFIER|YES)",
    "NVM_DIR",
    "NVM_BIN",
    "VOLTA_HOME",
    "PNPM_HOME",
    "COREPACK_HOME",
    "FNM_DIR",
    "UV_(CACHE_DIR|INDEX_URL|DEFAULT_INDEX|EXTRA_INDEX_URL|NATIVE_TLS)",
    "PIP_(INDEX_URL|EXTRA_INDEX_URL|CERT)",
    "XDG_[A-Z_]+",
    "LANG",
    "LANGUAGE",
    "LC_[A-Z_]+",
    "TZ",
    "TMPDIR",
    "TMP",
    "TEMP",
  ].join("|")})$`,
  "i",
);

/** Never inherited, whatever the list above says: credentials and agentloop's own settings. */
const WITHHELD = /(_API_KEY|_TOKEN|_SECRET|_PASSWORD)$|^(AGENTLOOP|OPENAI|ANTHROPIC)_|AUTH/i;

/**
 * The environment of a stdio server: the inherited variables of `parent` (see above; never API
 * keys, tokens, secrets or `AGENTLOOP_*`, `OPENAI_*`, `ANTHROPIC_*`), then the entry's own `env`,
 * which wins and may name anything. Values that are shell functions (`() {...}`) are skipped.
 */
export function childEnvironment(
  own: Readonly<Record<string, string>> | undefined,
  parent: NodeJS.ProcessEnv = process.env,
): Record<string, string> {
  const inherited = Object.entries(parent).filter(
    (entry): entry is [string, string] =>
      entry[1] !== undefined &&
      !entry[1].startsWith("()") &&
      INHERITED.test(entry[0]) &&
      !WITHHELD.test(entry[0]),
  );
  return Object.fromEntries([...inherited, ...Object.entries(own ?? {})]);
}
