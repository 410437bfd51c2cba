import { createHash } from "node:crypto";
import { mkdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { homedir } from "node:os";
import { isAbsolute, join } from "node:path";
import type { OAuthClientInformationMixed, OAuthTokens } from "@modelcontextprotocol/sdk/shared/auth.js";
import { z } from "zod";
import { errorMessage } from "../core/errors.js";

/** What is kept between runs for one remote server (and one configured client of it). */
export interface McpOAuthRecord {
  /** The server's URL, for a person reading the file. */
  url: string;
  /** The registration (dynamic, or a client ID metadata document), stamped with its authorization server. */
  client?: OAuthClientInformationMixed;
  /** The tokens, stamped with the authorization server that issued them. */
  tokens?: OAuthTokens;
  /** The authorization server refused the last refresh token: the sign-in expired (until a new one). */
  refused?: boolean | undefined;
}

/**
 * Where OAuth tokens and client registrations are kept, one record per key. Rejects with a
 * `TokenStoreError` (one line, naming the file) when a record cannot be read or written.
 */
export interface McpTokenStore {
  load(key: string): Promise<McpOAuthRecord | undefined>;
  save(key: string, record: McpOAuthRecord): Promise<void>;
}

export type TokenStoreErrorCode =
  /** The token file is a directory. */
  | "token_file_is_directory"
  /** The token file cannot be read (its permissions). */
  | "token_file_unreadable"
  /** The token file is not one agentloop wrote (not JSON, or not a record's shape). */
  | "corrupt_token_file"
  /** The token file or its directory cannot be written. */
  | "token_file_unwritable";

/** A record that cannot be read or written: `reason` names the file, `fix` says what to do with it. */
export class TokenStoreError extends Error {
  override readonly name = "TokenStoreError";
  constructor(
    readonly code: TokenStoreErrorCode,
    readonly reason: string,
    readonly fix: string,
  ) {
    super(reason);
  }
}

/** Records in memory only, for tests and for programs that keep no sign-in between runs. */
export function memoryTokenStore(): McpTokenStore {
  const records = new Map<string, McpOAuthRecord>();
  return {
    load: async (key) => {
      const record = records.get(key);
      return record && structuredClone(record);
    },
    save: async (key, record) => {
      records.set(key, structuredClone(record));
    },
  };
}

/**
 * The per-user directory of sign-ins: `$XDG_CONFIG_HOME/agentloop/mcp-oauth`, else
 * `%APPDATA%\agentloop\mcp-oauth` on Windows, else `~/.config/agentloop/mcp-oauth`.
 */
function defaultTokenDirectory(env: Readonly<Record<string, string | undefined>> = process.env): string {
  const xdg = env.XDG_CONFIG_HOME?.trim();
  const base =
    xdg && isAbsolute(xdg)
      ? xdg
      : process.platform === "win32" && env.APPDATA
        ? env.APPDATA
        : join(homedir(), ".config");
  return join(base, "agentloop", "mcp-oauth");
}

const recordSchema = z.looseObject({
  url: z.string(),
  client: z.looseObject({ client_id: z.string() }).optional(),
  tokens: z.looseObject({ access_token: z.string(), token_type: z.string() }).optional(),
});

/**
 * One JSON file per record in `directory` (default `defaultTokenDirectory()`), written whole
 * (a new file renamed over the old one) with mode 0600 in a 0700 directory. A file other users
 * can read is used, with one warning; one that cannot be read or parsed is an error.
 */
export function fileTokenStore(
  options: { directory?: string; onWarning?: (message: string) => void } = {},
): McpTokenStore {
  const directory = options.directory ?? defaultTokenDirectory();
  const warned = new Set<string>();
  const pathOf = (key: string) =>
    join(directory, `${createHash("sha256").update(key).digest("hex").slice(0, 32)}.json`);
  return {
    async load(key) {
      const path = pathOf(key);
      let text: string;
      let mode: number;
      try {
        const stats = await stat(path);
        if (stats.isDirectory()) {
          throw new TokenStoreError(
            "token_file_is_directory",
            `the token file ${path} is a directory`,
            `Delete it (rm -r ${path})`,
          );
        }
        mode = stats.mode;
        text = await readFile(path, "utf8");
      } catch (error) {
        if (error instanceof TokenStoreError) throw error;
        const code = (error as NodeJS.ErrnoException).code;
        if (code === "ENOENT") return undefined;
        throw new TokenStoreError(
          "token_file_unreadable",
          `the token file ${path} cannot be read (${code ?? errorMessage(error)})`,
          `Make it readable (chmod 600 ${path}) or delete it`,
        );
      }
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = undefined;
      }
      const record = recordSchema.safeParse(parsed);
      if (!record.success) {
        throw new TokenStoreError(
          "corrupt_token_file",
          `the token file ${path} is not one agentloop wrote`,
          `Delete it`,
        );
      }
      // Only about a file that is used: one that cannot be used gets its error alone.
      if (process.platform !== "win32" && (mode & 0o077) !== 0 && !warned.has(path)) {
        warned.add(path);
        options.onWarning?.(
          `the token file ${path} can be read by other users: run chmod 600 ${path} (agentloop writes it 0600).`,
        );
      }
      return record.data as McpOAuthRecord;
    },
    async save(key, record) {
      const path = pathOf(key);
      const temporary = `${path}.${process.pid}.tmp`;
      try {
        await mkdir(directory, { recursive: true, mode: 0o700 });
        await writeFile(temporary, `${JSON.stringify(record, null, 2)}\n`, { mode: 0o600 });
        await rename(temporary, path);
      } catch (error) {
        await rm(temporary, { force: true }).catch(() => {});
        const code = (error as NodeJS.ErrnoException).code;
        if (code === "EISDIR")
          throw new TokenStoreError(
            "token_file_is_directory",
            `the token file ${path} is a directory`,
            `Delete it (rm -r ${path})`,
          );
        throw new TokenStoreError(
          "token_file_unwritable",
          `the token file ${path} cannot be written (${code ?? errorMessage(error)})`,
          `Check the permissions of ${directory}`,
        );
      }
    },
  };
}
