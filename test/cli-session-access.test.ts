// The CLI on a SQLite store it cannot fully use: a session held by a process on another host
// (`--force` takes it over, with a warning naming that holder), a store it may only read
// (`sessions ls` and `show` work, writes are one line), and the modes of the store it creates.
import { spawn } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { type FakeOpenAIServer, startFakeOpenAIServer } from "../src/testing/fake-openai-server.js";
import { CLI, runCli } from "./helpers.js";

const root = mkdtempSync(join(tmpdir(), "agentloop-cli-access-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

let server: FakeOpenAIServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

/** A fresh folder (the default store lives under it) and a fake model that echoes. */
async function workspace() {
  const dir = mkdtempSync(join(root, "w-"));
  server = await startFakeOpenAIServer({
    respond: (request) => ({
      text: `Echo: ${(request.body.messages as { content: string }[]).at(-1)?.content}`,
    }),
  });
  const env = { OPENAI_BASE_URL: server.url, OPENAI_API_KEY: "sk-test" };
  const cli = (args: string[]) => runCli(args, { cwd: dir, env });
  return { dir, env, cli, file: join(dir, ".agentloop", "agentloop.db") };
}

const HOLDER = { pid: 4242, host: "build-7.elsewhere", token: "theirs" };

function heldElsewhere(file: string, id: string): void {
  const db = new DatabaseSync(file);
  db.prepare("UPDATE sessions SET holder = ? WHERE id = ?").run(JSON.stringify(HOLDER), id);
  db.close();
}

describe("a session held by a process on another host", () => {
  it("run --session and sessions rm refuse it naming the holder and --force; with --force they take it over, warning in one line", async () => {
    const w = await workspace();
    expect((await w.cli(["run", "--session", "s", "first"])).code).toBe(0);
    heldElsewhere(w.file, "s");

    const refused = await w.cli(["run", "--session", "s", "second"]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toBe(
      "agentloop: session 's' is in use by another agentloop process (process 4242 on build-7.elsewhere): wait for it or use another --session; if that process is gone, --force takes the session over\n",
    );
    const forced = await w.cli(["run", "--session", "s", "--force", "second"]);
    expect(forced.code).toBe(0);
    expect(forced.stdout).toBe("Echo: second\n");
    expect(forced.stderr).toBe(
      "agentloop: warning: session 's' was held by process 4242 on build-7.elsewhere; --force takes it over (if that process still runs, what it writes to the session from now on is refused)\n",
    );

    heldElsewhere(w.file, "s");
    const rm = await w.cli(["sessions", "rm", "s"]);
    expect(rm.code).toBe(2);
    expect(rm.stderr).toContain("(process 4242 on build-7.elsewhere)");
    const removed = await w.cli(["sessions", "rm", "s", "--force"]);
    expect(removed.code).toBe(0);
    expect(removed.stdout).toBe("Removed session 's'.\n");
    expect(removed.stderr).toBe(
      "agentloop: warning: session 's' was held by process 4242 on build-7.elsewhere; --force removes it (if that process still runs, what it writes to the session from now on is refused)\n",
    );
    expect((await w.cli(["sessions", "ls", "--json"])).stdout).toBe("[]\n");
  });

  it("--force without --session is a usage error", async () => {
    const w = await workspace();
    const run = await w.cli(["run", "--force", "hi"]);
    expect(run.code).toBe(2);
    expect(run.stderr).toBe("agentloop: --force takes a stored session over: name it with --session <id>.\n");
    expect(server?.requests).toHaveLength(0);
  });
});

/** Runs the CLI as a user who may not write what root made (as root: nobody; else: the same user, after chmod). */
function asReader(args: string[], cwd: string, env: Record<string, string>) {
  const asRoot = process.getuid?.() === 0;
  const command = asRoot ? "runuser" : process.execPath;
  const argv = asRoot ? ["-u", "nobody", "--", process.execPath, CLI, ...args] : [CLI, ...args];
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = spawn(command, argv, { cwd, env: { PATH: process.env.PATH ?? "", ...env } });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => {
      stdout += d;
    });
    child.stderr.setEncoding("utf8").on("data", (d: string) => {
      stderr += d;
    });
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

describe.skipIf(process.platform !== "linux")("a store this process may only read", () => {
  it("sessions ls and show work; sessions rm and run --session are one line naming the file", async () => {
    const w = await workspace();
    expect((await w.cli(["run", "--session", "s", "kept"])).code).toBe(0);
    const folder = join(w.dir, ".agentloop");
    // Reachable by the reader, writable by nobody but root.
    for (let dir = w.dir; dir.startsWith(root); dir = join(dir, "..")) chmodSync(dir, 0o755);
    chmodSync(w.file, 0o444);
    chmodSync(folder, 0o555);
    const before = statSync(w.file).mtimeMs;
    const env = { ...w.env, AGENTLOOP_DB: w.file };

    const ls = await asReader(["sessions", "ls", "--json"], w.dir, env);
    expect(ls.stderr).toBe("");
    expect(JSON.parse(ls.stdout)).toMatchObject([{ id: "s", messageCount: 2 }]);
    const show = await asReader(["sessions", "show", "s"], w.dir, env);
    expect(show.stderr).toBe("");
    expect(show.stdout).toContain("user: kept");

    for (const args of [
      ["sessions", "rm", "s"],
      ["run", "--session", "s", "more"],
    ]) {
      const write = await asReader(args, w.dir, env);
      expect(write.code, args.join(" ")).toBe(2);
      expect(write.stderr, args.join(" ")).toMatch(
        /^agentloop: \S+agentloop\.db cannot be written \(.*\): make it and its folder writable or set AGENTLOOP_DB to another file \(AGENTLOOP_DB\)\n$/,
      );
    }
    expect(statSync(w.file).mtimeMs).toBe(before);
    expect(existsSync(`${w.file}-wal`)).toBe(false);
    chmodSync(folder, 0o700);
  });
});

describe.skipIf(process.platform === "win32")("the store the CLI creates", () => {
  it("is 0600 in a .agentloop folder made 0700; the working folder keeps its mode", async () => {
    const w = await workspace();
    chmodSync(w.dir, 0o755);
    expect((await w.cli(["run", "--session", "s", "private"])).code).toBe(0);
    expect((statSync(w.file).mode & 0o777).toString(8)).toBe("600");
    expect((statSync(join(w.dir, ".agentloop")).mode & 0o777).toString(8)).toBe("700");
    expect((statSync(w.dir).mode & 0o777).toString(8)).toBe("755");
  });
});
