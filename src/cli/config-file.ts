import { statSync } from "node:fs";
import { basename, dirname, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { parseEnv } from "node:util";
import type { z } from "zod";
import { AgentloopError } from "../core/errors.js";
import type { McpOAuthConfig, McpServerConfig } from "../mcp/config.js";
import type { McpRoot } from "../mcp/server-requests.js";
import { type Zod, zod } from "../tools/zod.js";
import { type AgentConfig, agentEntries, MAX_DEPTH_LIMIT } from "./config-agents.js";
import { expandVariables } from "./config-variables.js";
import { readConfigText, readConfigTextSync } from "./read-config.js";
import { closest } from "./suggest.js";

/**
 * The config file's schemas, built when a config file is read: zod is not loaded, nor are the
 * schemas built, by a command run without one.
 */
function buildSchemas(z: Zod) {
  const price = z.strictObject({
    input: z.number().nonnegative(),
    output: z.number().nonnegative(),
    cachedInput: z.number().nonnegative().optional(),
  });
  /** Server entries are checked one by one below, so an error names the entry's own key. */
  const serverEntries = z.record(z.string(), z.record(z.string(), z.unknown()));

  /** The shape of `agentloop.json` (SPEC section 5). Unknown keys are errors. */
  const configFileSchema = z.strictObject({
    $schema: z.string().optional(),
    model: z.string().min(1).optional(),
    provider: z.enum(["openai", "openai-responses", "anthropic"]).optional(),
    baseUrl: z.string().optional(),
    azure: z
      .strictObject({ apiVersion: z.string().min(1), deployment: z.string().min(1).optional() })
      .optional(),
    instructions: z.string().optional(),
    maxIterations: z.number().int().positive().optional(),
    maxContextTokens: z.number().int().positive().optional(),
    tokenBudget: z.number().int().positive().optional(),
    costBudget: z.number().positive().optional(),
    /** Compaction by summary (SPEC section 13): on when present (or with `--compact`). */
    compaction: z
      .strictObject({
        at: z.number().gt(0).lte(1).optional(),
        model: z.string().min(1).optional(),
      })
      .optional(),
    timeout: z.number().positive().optional(),
    mode: z.enum(["natural", "explicit"]).optional(),
    toolProtocol: z.enum(["native", "xml"]).optional(),
    builtinTools: z.boolean().optional(),
    /** USD per million tokens by model id, over the built-in table (models/pricing.ts). */
    prices: z.record(z.string(), price).optional(),
    /** Tool names or globs (`*`, `?`) whose calls always ask (`require`) or never ask (`allow`). */
    approval: z
      .strictObject({
        require: z.array(z.string().min(1)).optional(),
        allow: z.array(z.string().min(1)).optional(),
      })
      .optional(),
    /** What a server's request for input gets: a person asked in a terminal ("ask"), the form's defaults, or a decline. */
    elicitation: z.enum(["ask", "accept-defaults", "decline"]).optional(),
    /** Where sessions are stored: a SQLite file path (SPEC section 9). */
    db: z.string().min(1).optional(),
    /**
     * `agentloop serve`: `store` false stores no run; `keys` gives each client its own API key
     * (its name, and the SHA-256 of the key in hex), checked by the server (server/owners.ts).
     */
    serve: z
      .strictObject({
        store: z.boolean().optional(),
        keys: z.array(z.strictObject({ name: z.string(), sha256: z.string() })).optional(),
      })
      .optional(),
    /** Claude Desktop and Cursor call it `mcpServers`, VS Code's mcp.json `servers`. */
    mcpServers: serverEntries.optional(),
    servers: serverEntries.optional(),
    /** VS Code's prompts for `${input:…}` values: accepted, not supported. */
    inputs: z.array(z.unknown()).optional(),
    /** Sub-agents by name (SPEC section 10), each checked in config-agents.ts. */
    agents: z.record(z.string(), z.unknown()).optional(),
    /** How deep sub-agents nest (a child of the top-level run has depth 1). */
    maxDepth: z.number().int().min(1).max(MAX_DEPTH_LIMIT).optional(),
  });

  // Entries as Claude Desktop, Cursor and VS Code write them. `dev` (VS Code's development mode)
  // and `auth` (Cursor's OAuth client) are accepted and ignored with a note.
  const envValue = z.union([z.string(), z.number(), z.null()]);
  /** Which of a server's tools are offered (names or globs); and the time limit of its calls, in seconds. */
  const toolFilter = z.strictObject({
    allow: z.array(z.string().min(1)).optional(),
    deny: z.array(z.string().min(1)).optional(),
  });
  const serverOptions = {
    optional: z.boolean().optional(),
    tools: toolFilter.optional(),
    toolTimeout: z.number().positive().optional(),
    /** Folders offered as MCP roots, relative to the config file's folder (see `rootsOf`). */
    roots: z.array(z.string().min(1)).optional(),
  };
  const stdioEntry = z.strictObject({
    type: z.literal("stdio").optional(),
    command: z.string().min(1),
    args: z.array(z.string()).optional(),
    env: z.record(z.string(), envValue).optional(),
    envFile: z.string().min(1).optional(),
    cwd: z.string().optional(),
    ...serverOptions,
    dev: z.unknown().optional(),
  });
  /** OAuth of a remote server (SPEC section 5); the keys' combinations are checked in `oauthOf`. */
  const oauthEntry = z.strictObject({
    clientId: z.string().min(1).optional(),
    clientSecret: z.string().min(1).optional(),
    privateKeyFile: z.string().min(1).optional(),
    grant: z.enum(["authorization_code", "client_credentials"]).optional(),
    scope: z.string().optional(),
  });
  const httpEntry = z.strictObject({
    type: z.enum(["http", "streamable-http", "sse"]).optional(),
    url: z.string(),
    headers: z.record(z.string(), z.string()).optional(),
    ...serverOptions,
    oauth: oauthEntry.optional(),
    dev: z.unknown().optional(),
    auth: z.unknown().optional(),
  });
  return { configFileSchema, stdioEntry, httpEntry, oauthEntry };
}

type Schemas = ReturnType<typeof buildSchemas>;
let schemas: Schemas | undefined;
const configSchemas = (): Schemas => {
  schemas ??= buildSchemas(zod());
  return schemas;
};

const IGNORED: Record<string, string> = {
  dev: "(VS Code's development mode) is ignored.",
  auth: '(Cursor\'s OAuth settings) is ignored: write them as "oauth": {"clientId", "clientSecret", "scope"}.',
};

export type ConfigFile = Omit<
  z.infer<Schemas["configFileSchema"]>,
  "mcpServers" | "servers" | "inputs" | "agents"
> & {
  mcpServers?: Record<string, McpServerConfig>;
  agents?: Record<string, AgentConfig>;
};

/**
 * Reads the config file: `explicitPath` when given (it must exist), else `./agentloop.json`
 * when present, else an empty config. `notes` are one-line remarks for stderr (keys accepted
 * but ignored).
 * @throws AgentloopError("config") with one line naming the file and the key.
 */
export async function loadConfigFile(
  explicitPath: string | undefined,
  cwd = process.cwd(),
): Promise<{ path?: string; name: string; config: ConfigFile; notes: string[] }> {
  const name = explicitPath ?? "agentloop.json";
  const path = resolve(cwd, name);
  const text = await readConfigText(path, name, explicitPath !== undefined);
  if (text === undefined) return { name, config: {}, notes: [] };
  if (text.trim() === "") {
    throw new AgentloopError(
      "config",
      `${name} is empty: write a JSON object in it, e.g. {"model": "gpt-4o-mini"}.`,
    );
  }
  let raw: unknown;
  try {
    // A "__proto__" key would vanish silently (zod drops it; assigning it sets a prototype).
    raw = JSON.parse(text, (key, value: unknown) => {
      if (key === "__proto__") throw new ReservedKey();
      return value;
    });
  } catch (error) {
    if (error instanceof ReservedKey) {
      throw new AgentloopError("config", `${name} uses "__proto__" as a name: rename it.`);
    }
    const detail = error instanceof Error ? error.message : String(error);
    throw new AgentloopError(
      "config",
      `${name} is not valid JSON (${detail}). Fix the file or pass another --config.`,
    );
  }
  const { configFileSchema } = configSchemas();
  const parsed = configFileSchema.safeParse(raw);
  if (!parsed.success)
    throw new AgentloopError(
      "config",
      describeIssue(parsed.error.issues[0], name, configFileSchema.keyof().options),
    );
  const { mcpServers, servers, inputs, agents, ...rest } = parsed.data;
  const notes: string[] = [];
  if (mcpServers && servers) {
    throw new AgentloopError("config", `${name} has both "mcpServers" and "servers": keep one of them.`);
  }
  if (inputs !== undefined) {
    notes.push(
      `${name}: "inputs" (VS Code's prompts for \${input:…} values) is ignored: write the values in "env" or "headers".`,
    );
  }
  const config: ConfigFile = rest;
  if (agents) config.agents = agentEntries(zod(), agents, name);
  const entries = mcpServers ?? servers;
  if (entries) {
    const key = mcpServers ? "mcpServers" : "servers";
    config.mcpServers = {};
    for (const [server, entry] of Object.entries(entries)) {
      config.mcpServers[server] = serverEntry(entry, `${key}.${server}`, { name, path, cwd }, notes);
    }
  }
  return { path, name, config, notes };
}

/** One `mcpServers` entry, checked against the shape its `command` or `url` calls for. */
function serverEntry(
  entry: Record<string, unknown>,
  where: string,
  source: { name: string; path: string; cwd: string },
  notes: string[],
): McpServerConfig {
  const { name: file, cwd } = source;
  const { stdioEntry, httpEntry, oauthEntry } = configSchemas();
  const schema = "command" in entry ? stdioEntry : "url" in entry ? httpEntry : undefined;
  if (!schema) {
    throw new AgentloopError(
      "config",
      `'${where}' in ${file} needs "command" (a local server) or "url" (a remote one).`,
    );
  }
  if ("command" in entry && "url" in entry) {
    throw new AgentloopError(
      "config",
      `'${where}' in ${file} has both "command" and "url": keep "command" for a local server or "url" for a remote one.`,
    );
  }
  const local = schema === stdioEntry;
  // A key of the other kind of server: say which kind it belongs to, rather than "unknown key".
  const own: readonly string[] = schema.keyof().options;
  const other: readonly string[] = (local ? httpEntry : stdioEntry).keyof().options;
  const misplaced = Object.keys(entry).find((key) => other.includes(key) && !own.includes(key));
  if (misplaced !== undefined) {
    throw new AgentloopError(
      "config",
      local
        ? `'${where}.${misplaced}' in ${file} applies only to remote servers (with a "url"); this one runs a "command": remove it.`
        : `'${where}.${misplaced}' in ${file} applies only to local servers (with a "command"); this one is reached at a "url": remove it.`,
    );
  }
  const parsed = schema.safeParse(expandVariables(entry, where, file, { cwd, env: process.env }));
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const keys = issue?.path[0] === "oauth" ? oauthEntry.keyof().options : own;
    throw new AgentloopError("config", describeIssue(issue, file, keys, where, issue?.path.length === 1));
  }
  for (const key of Object.keys(IGNORED)) {
    if (key in parsed.data) notes.push(`${file}: '${where}.${key}' ${IGNORED[key]}`);
  }
  const { tools, toolTimeout, optional } = parsed.data;
  const roots = rootsOf(parsed.data.roots, `${where}.roots`, file, dirname(source.path));
  const common = {
    ...(optional !== undefined && { optional }),
    ...(roots && { roots }),
    ...(tools && { tools }),
    ...(toolTimeout !== undefined && { toolTimeoutMs: Math.ceil(toolTimeout * 1000) }),
  };
  if ("url" in parsed.data) {
    const { url, headers, type } = parsed.data;
    if (!isHttpUrl(url)) {
      throw new AgentloopError(
        "config",
        `'${where}.url' in ${file} must be an http:// or https:// URL, got '${url}'.`,
      );
    }
    // A key file goes with its config file (as in a copied or shared config), wherever agentloop runs.
    const oauth = oauthOf(parsed.data, `${where}.oauth`, file, dirname(source.path));
    return {
      url,
      ...(type && { type }),
      ...(headers && { headers }),
      ...common,
      ...(oauth && { oauth }),
    };
  }
  const { command, args, cwd: dir, type } = parsed.data;
  const env = environment(parsed.data, where, file, cwd);
  return {
    command,
    ...(type && { type }),
    ...(args && { args }),
    ...(env && { env }),
    ...(dir !== undefined && { cwd: dir }),
    ...common,
  };
}

/** The `oauth` of a remote entry, its key file resolved against `dir`: one line per bad combination. */
function oauthOf(
  entry: z.infer<Schemas["httpEntry"]>,
  where: string,
  file: string,
  dir: string,
): McpOAuthConfig | undefined {
  const { oauth, headers } = entry;
  if (!oauth) return undefined;
  const bad = (message: string) => new AgentloopError("config", `'${where}' in ${file} ${message}`);
  if (Object.keys(headers ?? {}).some((key) => key.toLowerCase() === "authorization"))
    throw bad('comes with an "Authorization" header: keep one of them (the header wins over a sign-in).');
  if (oauth.clientSecret !== undefined && oauth.privateKeyFile !== undefined)
    throw bad('has both "clientSecret" and "privateKeyFile": keep the one the authorization server expects.');
  if (
    oauth.clientId === undefined &&
    (oauth.clientSecret !== undefined || oauth.privateKeyFile !== undefined)
  )
    throw bad(
      `has a ${oauth.clientSecret !== undefined ? '"clientSecret"' : '"privateKeyFile"'} but no "clientId": add the client it belongs to.`,
    );
  if (
    oauth.grant === "client_credentials" &&
    (oauth.clientId === undefined || (oauth.clientSecret ?? oauth.privateKeyFile) === undefined)
  )
    throw bad(
      'uses "grant": "client_credentials", which needs "clientId" and "clientSecret" or "privateKeyFile".',
    );
  return {
    ...oauth,
    ...(oauth.privateKeyFile !== undefined && { privateKeyFile: resolve(dir, oauth.privateKeyFile) }),
  };
}

/**
 * The folders of `roots`, each resolved against `dir` (the config file's folder, so a config
 * means the same wherever agentloop runs) and checked: a server is offered exactly these.
 */
function rootsOf(
  paths: string[] | undefined,
  where: string,
  file: string,
  dir: string,
): McpRoot[] | undefined {
  return paths?.map((path) => {
    const folder = resolve(dir, path);
    if (!statSync(folder, { throwIfNoEntry: false })?.isDirectory()) {
      throw new AgentloopError(
        "config",
        `'${where}' in ${file} names '${path}', which is not a folder (${folder}): create it, or fix the path (a relative one starts at the config file's folder).`,
      );
    }
    return { uri: pathToFileURL(folder).href, name: basename(folder) || folder };
  });
}

/** `envFile` (dotenv syntax) under `env`; numbers become strings, `null` leaves a variable out. */
function environment(
  entry: z.infer<Schemas["stdioEntry"]>,
  where: string,
  file: string,
  cwd: string,
): Record<string, string> | undefined {
  if (!entry.env && !entry.envFile) return undefined;
  const env: Record<string, string> = {};
  if (entry.envFile) {
    const path = resolve(cwd, entry.envFile);
    const text = readConfigTextSync(path, `'${where}.envFile' (${entry.envFile}) in ${file}`);
    Object.assign(env, parseEnv(text));
  }
  for (const [key, value] of Object.entries(entry.env ?? {})) {
    if (value === null) delete env[key];
    else env[key] = String(value);
  }
  return env;
}

export function isHttpUrl(value: string): boolean {
  try {
    const { protocol } = new URL(value);
    return protocol === "http:" || protocol === "https:";
  } catch {
    return false;
  }
}

function describeIssue(
  issue: z.core.$ZodIssue | undefined,
  file: string,
  knownKeys: readonly string[],
  prefix?: string,
  nested = false,
): string {
  if (!issue) return `${file} is not a valid configuration.`;
  const where = [...(prefix ? [prefix] : []), ...issue.path.map(String)].join(".");
  if (issue.code === "unrecognized_keys") {
    const keys = issue.keys.map((key) => (where ? `${where}.${key}` : key));
    const candidates = issue.path.length === 0 || nested ? knownKeys : [];
    return unknownKeys(keys, issue.keys, candidates, file);
  }
  const message = issue.message.replace(/^Invalid input: /, "");
  return where
    ? `'${where}' in ${file} is invalid: ${message}.`
    : `${file} must hold a JSON object: ${message}.`;
}

const quoted = (items: readonly string[]) =>
  new Intl.ListFormat("en", { type: "conjunction" }).format(items.map((item) => `'${item}'`));

/** "unknown key 'maxIteration' in agentloop.json: did you mean 'maxIterations'?" */
function unknownKeys(shown: string[], keys: string[], candidates: readonly string[], file: string): string {
  const fixes = keys.flatMap((key, i) => {
    const match = closest(key, candidates);
    return match ? [[shown[i] as string, match] as const] : [];
  });
  if (keys.length === 1) {
    const fix = fixes[0]?.[1];
    return `unknown key ${quoted(shown)} in ${file}: ${fix ? `did you mean '${fix}'?` : "remove it (docs/config.md lists every key)."}`;
  }
  const hints = fixes.map(([key, fix]) => `'${key}' → '${fix}'`).join(", ");
  return `unknown keys ${quoted(shown)} in ${file}: remove them or fix their spelling${hints ? ` (${hints})` : ""}.`;
}

class ReservedKey extends Error {}
