// How the PostgreSQL store connects: a database that never answers (time limits, never a hang), and
// TLS as libpq does it (sslmode, sslrootcert), through the store and the CLI, each failure one line.
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { postgresStore, type SessionStore } from "../src/store/index.js";
import { runCli } from "./helpers.js";
import { type Postgres, skipReason, startPostgres, storeRejection } from "./support/postgres.js";

const PASSWORD = "s3cret-pw";

const rejection = (promise: Promise<unknown>) => storeRejection(promise, PASSWORD);

/** A TCP server that accepts connections and never says a word (a frozen postmaster, a wrong service). */
async function silentServer(): Promise<{ port: number; close(): Promise<void> }> {
  const sockets: Socket[] = [];
  const server: Server = createServer((socket) => sockets.push(socket));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  return {
    port,
    close: () =>
      new Promise((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

describe("a PostgreSQL server that accepts connections and never answers", () => {
  let silent: Awaited<ReturnType<typeof silentServer>>;
  beforeAll(async () => {
    silent = await silentServer();
  });
  afterAll(() => silent.close());

  it("fails the store's start with one line naming host and port and connect_timeout", async () => {
    const url = `postgres://agent:${PASSWORD}@127.0.0.1:${silent.port}/sessions?connect_timeout=1`;
    const error = await rejection(postgresStore(url));
    expect(error.message).toBe(
      `PostgreSQL at 127.0.0.1:${silent.port} did not answer within 1 s (connect_timeout): check that it runs and accepts connections, or raise ?connect_timeout= (seconds) in the URL`,
    );
  });

  it("ends agentloop serve, run --session and sessions with that line (exit 2)", async () => {
    const db = `postgres://agent:${PASSWORD}@127.0.0.1:${silent.port}/sessions?connect_timeout=1`;
    for (const command of [["serve", "--port", "0"], ["run", "--session", "s", "hi"], ["sessions"]]) {
      const { code, stderr } = await runCli(command, { env: { OPENAI_API_KEY: "sk-x", AGENTLOOP_DB: db } });
      expect(code).toBe(2);
      expect(stderr.trim().split("\n")).toHaveLength(1);
      expect(stderr).toContain(`PostgreSQL at 127.0.0.1:${silent.port} did not answer within 1 s`);
      expect(stderr).toContain("(AGENTLOOP_DB)");
      expect(stderr).not.toContain(PASSWORD);
    }
  });

  it("refuses a connect_timeout or sslmode that is not one, in one line", async () => {
    const base = `postgres://agent:${PASSWORD}@127.0.0.1:${silent.port}/sessions`;
    expect((await rejection(postgresStore(`${base}?connect_timeout=soon`))).message).toBe(
      'the PostgreSQL URL\'s connect_timeout "soon" is not a time: give whole seconds from 0 (no limit) to 3600',
    );
    expect((await rejection(postgresStore(`${base}?sslmode=always`))).message).toBe(
      'the PostgreSQL URL\'s sslmode "always" is not one: use disable, prefer, require, verify-ca or verify-full',
    );
    expect(
      (await rejection(postgresStore(`${base}?sslmode=verify-ca&sslrootcert=/nonexistent/ca.pem`))).message,
    ).toBe(
      "the PostgreSQL URL's sslrootcert /nonexistent/ca.pem cannot be read (ENOENT): give the path of the PEM file of the CA that signed the server's certificate",
    );
  });
});

describe("the lease of a PostgreSQL store", () => {
  it("is refused outside 1 s to 1 h, in one line (exit 2), before anything is opened", async () => {
    for (const value of ["0.001", "100000"]) {
      expect(await runCli(["serve", "--lease", value])).toMatchObject({
        code: 2,
        stderr: `agentloop: option '--lease <s>' argument '${value}' is invalid. --lease must be a number of seconds from 1 to 3600.\n`,
      });
    }
    const env = { AGENTLOOP_DB: "postgres://127.0.0.1:1/sessions", AGENTLOOP_DB_LEASE: "0.001" };
    expect(await runCli(["sessions"], { env })).toMatchObject({
      code: 2,
      stderr:
        "agentloop: AGENTLOOP_DB_LEASE is '0.001': give the lease in seconds, from 1 to 3600 (default 30).\n",
    });
    const error = await rejection(postgresStore("postgres://127.0.0.1:1/sessions", { leaseMs: 1e12 }));
    expect(error.message).toBe("leaseMs 1000000000000 is out of range: give 100 ms to 1 day (86400000 ms)");
  });
});

describe.skipIf(skipReason !== undefined)(
  `PostgreSQL that stops answering mid-run ${skipReason ? `(skipped: ${skipReason})` : ""}`,
  () => {
    let pg: Postgres;
    beforeAll(async () => {
      pg = await startPostgres();
    }, 60_000);
    afterAll(() => pg?.stop());

    it("a frozen server ends a checkpoint and ping with one line naming host and port; once it answers, all goes on", async () => {
      const url = `${await pg.database()}?statement_timeout=500&connect_timeout=1`;
      const store = await postgresStore(url, { leaseMs: 1000 });
      try {
        const handle = await store.acquire("frozen");
        await handle.checkpoint({ messages: [{ role: "user", content: "before" }] });
        pg.freeze();
        try {
          const error = await rejection(handle.checkpoint({ messages: [{ role: "user", content: "lost" }] }));
          expect(error.message).toMatch(/^PostgreSQL at 127\.0\.0\.1:\d+ did not answer (a query )?within/);
          expect((await rejection(store.ping())).message).toMatch(
            /^PostgreSQL at 127\.0\.0\.1:\d+ did not answer/,
          );
        } finally {
          pg.thaw();
        }
        await store.ping();
        expect((await store.read("frozen"))?.messages.map((m) => m.content)).toEqual(["before"]);
      } finally {
        await store.close();
      }
    });

    it("sslmode=require on a server without TLS is one line; prefer (the default) and disable connect", async () => {
      const url = await pg.database();
      const error = await rejection(postgresStore(`${url}?sslmode=require`));
      expect(error.message).toMatch(
        /^PostgreSQL at 127\.0\.0\.1:\d+ does not support SSL, which sslmode=require requires: turn ssl on in the server, or use sslmode=prefer or disable$/,
      );
      for (const mode of ["prefer", "disable", "allow"])
        await (await postgresStore(`${url}?sslmode=${mode}`)).close();
      await (await postgresStore(url)).close();
    });
  },
);

describe.skipIf(skipReason !== undefined)(
  `PostgreSQL with TLS (a self-signed certificate) ${skipReason ? `(skipped: ${skipReason})` : ""}`,
  () => {
    let pg: Postgres;
    let dir: string;
    beforeAll(async () => {
      pg = await startPostgres({ tls: true });
      dir = mkdtempSync(join(tmpdir(), "agentloop-tls-"));
    }, 60_000);
    afterAll(async () => {
      if (dir) rmSync(dir, { recursive: true, force: true });
      await pg?.stop();
    });

    /** Whether the store's connections to the server are encrypted, as the server sees them. */
    async function encrypted(store: SessionStore, url: string): Promise<boolean[]> {
      await store.ping();
      const { default: pgDriver } = await import("pg");
      const client = new pgDriver.Client({ connectionString: url, ssl: false });
      await client.connect();
      try {
        const { rows } = await client.query<{ ssl: boolean }>(
          `SELECT s.ssl FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid)
           WHERE a.application_name = 'agentloop' AND a.datname = current_database()`,
        );
        return rows.map((r) => r.ssl);
      } finally {
        await client.end();
      }
    }

    it("sslmode=require (and the default, prefer) encrypt without verifying the self-signed certificate", async () => {
      const url = await pg.database();
      for (const suffix of ["?sslmode=require", ""]) {
        const store = await postgresStore(`${url}${suffix}`);
        try {
          expect(await encrypted(store, url)).toEqual([true]);
        } finally {
          await store.close();
        }
      }
      const disabled = await postgresStore(`${url}?sslmode=disable`);
      try {
        expect(await encrypted(disabled, url)).toEqual([false]);
      } finally {
        await disabled.close();
      }
    });

    it("verify-full and verify-ca check the certificate against sslrootcert; a failure is one line", async () => {
      const url = await pg.database();
      const noCa = await rejection(postgresStore(`${url}?sslmode=verify-full`));
      expect(noCa.message).toMatch(
        /^PostgreSQL at 127\.0\.0\.1:\d+: its certificate was refused \(self[- ]signed certificate; sslmode=verify-full\): give the CA that signed it with sslrootcert=<file>, or use sslmode=require to encrypt without verifying the server$/,
      );
      for (const mode of ["verify-full", "verify-ca", "require"]) {
        const store = await postgresStore(`${url}?sslmode=${mode}&sslrootcert=${pg.certificate}`);
        await store.close();
      }
      // A CA that did not sign it: refused in every mode that verifies, require included (libpq's rule).
      const other = join(dir, "other.pem");
      const { execFileSync } = await import("node:child_process");
      execFileSync(
        "openssl",
        [
          ...["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=other"],
          ...["-keyout", join(dir, "other.key"), "-out", other],
        ],
        { stdio: "ignore" },
      );
      for (const mode of ["verify-ca", "require"]) {
        const error = await rejection(postgresStore(`${url}?sslmode=${mode}&sslrootcert=${other}`));
        expect(error.message).toContain(`its certificate was refused`);
        expect(error.message).toContain(`sslmode=${mode}`);
      }
      const byName = url.replace("127.0.0.1", "localhost");
      await (await postgresStore(`${byName}?sslmode=verify-full&sslrootcert=${pg.certificate}`)).close();
    });

    it("the CLI connects with sslmode=require and prints no warning; a refused certificate is one line (exit 2)", async () => {
      const url = await pg.database();
      const ok = await runCli(["sessions"], { env: { AGENTLOOP_DB: `${url}?sslmode=require` } });
      expect(ok).toMatchObject({
        code: 0,
        stderr: 'agentloop: no sessions yet: agentloop run --session <id> "<prompt>" starts one\n',
      });
      const refused = await runCli(["sessions"], { env: { AGENTLOOP_DB: `${url}?sslmode=verify-full` } });
      expect(refused.code).toBe(2);
      expect(refused.stderr.trim().split("\n")).toHaveLength(1);
      expect(refused.stderr).toMatch(
        /^agentloop: PostgreSQL at 127\.0\.0\.1:\d+: its certificate was refused .*\(AGENTLOOP_DB\)\n$/,
      );
    });
  },
);
