/**
 * The built `agentloop serve` as a child process, for the server's end-to-end tests: its URL once
 * it listens, its stderr as it grows, its exit code; every process started in a test is killed
 * after it.
 */
import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach } from "vitest";
import { CLI } from "../helpers.js";

export interface ServeProcess {
  child: ChildProcessWithoutNullStreams;
  /** The exit code (null when killed by a signal). */
  exited: Promise<number | null>;
  /** Resolves with the first match of `pattern` in stderr; rejects if the process exits first. */
  waitFor(pattern: RegExp): Promise<RegExpExecArray>;
  /** The base URL (`http://127.0.0.1:PORT`) once the server listens. */
  url(): Promise<string>;
  stderr(): string;
}

const started: ServeProcess[] = [];
afterEach(() => {
  for (const serve of started.splice(0)) if (serve.child.exitCode === null) serve.child.kill("SIGKILL");
});

/**
 * Starts `agentloop serve --port 0 ...args` with a clean environment plus `env`, in `cwd` (default
 * a new temporary folder, where its default store `.agentloop/agentloop.db` goes).
 */
export function startServe(env: Record<string, string>, args: string[] = [], cwd?: string): ServeProcess {
  const child = spawn(process.execPath, [CLI, "serve", "--port", "0", ...args], {
    env: { PATH: process.env.PATH ?? "", ...env },
    cwd: cwd ?? mkdtempSync(join(tmpdir(), "agentloop-serve-")),
    stdio: ["pipe", "pipe", "pipe"],
  });
  let stderr = "";
  const watchers: (() => void)[] = [];
  child.stderr.setEncoding("utf8").on("data", (d: string) => {
    stderr += d;
    for (const watch of watchers) watch();
  });
  const exited = new Promise<number | null>((resolve) => child.on("close", resolve));
  const waitFor = (pattern: RegExp) =>
    new Promise<RegExpExecArray>((resolve, reject) => {
      const watch = () => {
        const match = pattern.exec(stderr);
        if (match) resolve(match);
      };
      watchers.push(watch);
      watch();
      void exited.then(() => reject(new Error(`serve exited before ${pattern}: ${stderr}`)));
    });
  const serve: ServeProcess = {
    child,
    exited,
    waitFor,
    url: async () => (await waitFor(/serving \S+ on (http:\/\/\S+) /))[1] as string,
    stderr: () => stderr,
  };
  started.push(serve);
  return serve;
}

/** A raw HTTP/1.1 request (fetch cannot set `Host`): status, headers and body. */
export function rawRequest(
  url: string,
  options: { method?: string; path: string; headers?: Record<string, string>; body?: string },
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: string }> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: hostname.replace(/^\[(.*)\]$/, "$1"),
        port,
        method: options.method ?? "GET",
        path: options.path,
        headers: options.headers,
      },
      (res) => {
        let body = "";
        res.setEncoding("utf8").on("data", (d: string) => {
          body += d;
        });
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      },
    );
    req.on("error", reject);
    req.end(options.body);
  });
}
