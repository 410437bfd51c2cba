/**
 * A throwaway PostgreSQL cluster for tests: Debian's server binaries (`/usr/lib/postgresql/N/bin`),
 * `initdb` in a temp dir, `pg_ctl start` on a free port on 127.0.0.1 only, stopped and deleted
 * after. PostgreSQL refuses to run as root, so as root (CI) the cluster runs as `nobody`.
 *
 *   const pg = await startPostgres();   // undefined (with `skipReason`) when there is no server
 *   const url = await pg.database();    // a fresh, empty database
 *   await pg.stop();
 *
 * `startPostgres({ tls: true })` serves TLS too, with a self-signed certificate (made with openssl)
 * for localhost and 127.0.0.1, whose file is `pg.certificate`.
 */
import { execFile } from "node:child_process";
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { expect } from "vitest";
import { StoreError } from "../../src/store/index.js";

const run = promisify(execFile);

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/** The newest `/usr/lib/postgresql/<version>/bin` holding `initdb`, if any. */
function serverBin(): string | undefined {
  const root = "/usr/lib/postgresql";
  if (!existsSync(root)) return undefined;
  const versions = readdirSync(root)
    .filter((v) => existsSync(join(root, v, "bin", "initdb")))
    .sort((a, b) => Number(b) - Number(a));
  return versions[0] === undefined ? undefined : join(root, versions[0], "bin");
}

const bin = serverBin();

/** Why the PostgreSQL tests are skipped here, or undefined when they run. */
export const skipReason =
  bin === undefined
    ? "no PostgreSQL server binaries in /usr/lib/postgresql/*/bin (install Debian's postgresql package)"
    : undefined;

export interface Postgres {
  /** Creates a new, empty database and returns its URL. */
  database(): Promise<string>;
  /** Stops the server (its data kept), as a crash or an outage would: connections break. */
  halt(): Promise<void>;
  /** Starts it again on the same port after `halt()`. */
  restart(): Promise<void>;
  /** Stops every process of the server with SIGSTOP: connections stay open and nothing answers (a hung host). */
  freeze(): void;
  /** Lets the frozen processes go on (SIGCONT). */
  thaw(): void;
  /** With `tls`: the server's self-signed certificate (PEM file), its own CA. */
  certificate?: string;
  stop(): Promise<void>;
}

/** The pids of the server: the postmaster (first line of postmaster.pid) and its children. */
function serverPids(data: string): number[] {
  const main = Number(readFileSync(join(data, "postmaster.pid"), "utf8").split("\n")[0]);
  const children = readdirSync("/proc")
    .filter((name) => /^\d+$/.test(name))
    .filter((pid) => {
      try {
        const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
        return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]) === main;
      } catch {
        return false;
      }
    })
    .map(Number);
  return [main, ...children];
}

/** Sends `signal` to every process of the server (one that has just exited is passed over). */
function signalServer(data: string, signal: NodeJS.Signals): void {
  for (const pid of serverPids(data)) {
    try {
      process.kill(pid, signal);
    } catch {}
  }
}

/** util-linux's runuser, found even where PATH leaves out the sbin folders. */
const RUNUSER =
  ["/usr/sbin/runuser", "/sbin/runuser", "/usr/bin/runuser"].find((path) => existsSync(path)) ?? "runuser";

export async function startPostgres(options: { tls?: boolean } = {}): Promise<Postgres> {
  if (bin === undefined) throw new Error(skipReason);
  const dir = mkdtempSync(join(tmpdir(), "agentloop-pg-"));
  const data = join(dir, "data");
  const asRoot = process.getuid?.() === 0;
  // As root, run the server as nobody: it owns the temp dir, and everything runs through runuser.
  const nobody = asRoot ? Number((await run("id", ["-u", "nobody"])).stdout.trim()) : undefined;
  if (nobody !== undefined) {
    const group = Number((await run("id", ["-g", "nobody"])).stdout.trim());
    chownSync(dir, nobody, group);
    chmodSync(dir, 0o700);
  }
  const pg = (tool: string, args: string[]) =>
    nobody === undefined
      ? run(join(bin, tool), args)
      : run(RUNUSER, ["-u", "nobody", "--", join(bin, tool), ...args]);
  const port = await freePort();
  await pg("initdb", ["-D", data, "-U", "agentloop", "--auth=trust", "-E", "UTF8", "--no-sync"]);
  let serverOptions = `-h 127.0.0.1 -p ${port} -k ${dir} -F -c max_connections=200`;
  const certificate = join(dir, "server.crt");
  if (options.tls) {
    const key = join(dir, "server.key");
    await run("openssl", [
      ...["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=localhost"],
      ...["-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout", key, "-out", certificate],
    ]);
    chmodSync(key, 0o600);
    if (nobody !== undefined)
      chownSync(key, nobody, Number((await run("id", ["-g", "nobody"])).stdout.trim()));
    chmodSync(certificate, 0o644);
    serverOptions += ` -c ssl=on -c ssl_cert_file=${certificate} -c ssl_key_file=${key}`;
  }
  const start = () => pg("pg_ctl", ["start", "-w", "-D", data, "-l", join(dir, "log"), "-o", serverOptions]);
  await start();
  const base = `postgres://agentloop@127.0.0.1:${port}`;
  let databases = 0;
  return {
    async database() {
      const name = `db${++databases}`;
      await pg("createdb", ["-h", "127.0.0.1", "-p", String(port), "-U", "agentloop", name]);
      return `${base}/${name}`;
    },
    async halt() {
      await pg("pg_ctl", ["stop", "-w", "-m", "immediate", "-D", data]);
    },
    async restart() {
      await start();
    },
    freeze: () => signalServer(data, "SIGSTOP"),
    thaw: () => signalServer(data, "SIGCONT"),
    ...(options.tls && { certificate }),
    async stop() {
      try {
        // A test that failed while the server was frozen: let it go on, or it would not stop.
        if (existsSync(join(data, "postmaster.pid"))) signalServer(data, "SIGCONT");
        await pg("pg_ctl", ["stop", "-w", "-m", "immediate", "-D", data]).catch(() => undefined);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}

/**
 * The StoreError `promise` rejects with, checked to be one line (and, given `secret`, not to
 * contain it): how every store failure reaches a person.
 */
export async function storeRejection(promise: Promise<unknown>, secret?: string): Promise<StoreError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(StoreError);
  expect((error as StoreError).message).not.toContain("\n");
  if (secret) expect((error as StoreError).message).not.toContain(secret);
  return error as StoreError;
}
