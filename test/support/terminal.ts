import { type ChildProcess, spawn } from "node:child_process";
import { afterEach } from "vitest";
import { CLI } from "../helpers.js";

const children: ChildProcess[] = [];
afterEach(() => {
  for (const child of children.splice(0)) if (child.exitCode === null) child.kill("SIGKILL");
});

/**
 * Runs `agentloop <args>` in a pseudo-terminal (util-linux `script`), like a person at a
 * keyboard: `type` keys, `waitFor` text to appear after the last keys typed. Killed at the end
 * of the test if still running.
 */
export function terminal(args: string[], options: { env?: Record<string, string>; cwd?: string } = {}) {
  const command = [process.execPath, CLI, ...args].map((a) => JSON.stringify(a)).join(" ");
  const child = spawn("script", ["-qfec", command, "/dev/null"], {
    ...(options.cwd && { cwd: options.cwd }),
    env: { PATH: process.env.PATH ?? "", TERM: "xterm", ...options.env },
    stdio: ["pipe", "pipe", "pipe"],
  });
  children.push(child);
  let output = "";
  let mark = 0;
  const waiters: { text: string; from: number; resolve: () => void }[] = [];
  child.stdout.setEncoding("utf8").on("data", (d: string) => {
    output += d;
    for (const w of [...waiters]) {
      if (output.indexOf(w.text, w.from) === -1) continue;
      waiters.splice(waiters.indexOf(w), 1);
      w.resolve();
    }
  });
  const exited = new Promise<number | null>((resolve) => child.on("close", resolve));
  return {
    /** Resolves once `text` appears after the last `type`. */
    waitFor: (text: string) =>
      new Promise<void>((resolve) => {
        if (output.indexOf(text, mark) !== -1) resolve();
        else waiters.push({ text, from: mark, resolve });
      }),
    type(keys: string) {
      mark = output.length;
      child.stdin.write(keys);
    },
    get output() {
      return output;
    },
    exited,
  };
}
