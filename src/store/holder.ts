// Who holds a session, and whether that holder is still alive. On one machine a dead holder is
// recognised at once: its pid is gone, is a zombie, or now belongs to a process that started at
// another time (a reused pid), or the machine has rebooted since. A holder on another host is
// taken as alive (a networked store uses timed leases instead).
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { hostname } from "node:os";

export interface Holder {
  pid: number;
  host: string;
  /** Linux: the kernel's boot id, so a pid from before a reboot is not taken for a live one. */
  boot?: string;
  /** Linux: the process start time (clock ticks after boot), which tells a reused pid apart. */
  start?: string;
  /** One per acquire: which handle holds the session. */
  token: string;
}

function readText(path: string): string | undefined {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return undefined;
  }
}

/** State and start time from `/proc/<pid>/stat` (Linux), undefined elsewhere or when gone. */
function procStat(pid: number): { state: string; start: string } | undefined {
  const text = readText(`/proc/${pid}/stat`);
  if (text === undefined) return undefined;
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after the last ")".
  const fields = text.slice(text.lastIndexOf(")") + 2).split(" ");
  const state = fields[0];
  const start = fields[19];
  return state && start ? { state, start } : undefined;
}

let self: Omit<Holder, "token"> | undefined;

function identity(): Omit<Holder, "token"> {
  if (self) return self;
  const boot = readText("/proc/sys/kernel/random/boot_id")?.trim();
  const start = procStat(process.pid)?.start;
  self = {
    pid: process.pid,
    host: hostname(),
    ...(boot ? { boot } : {}),
    ...(start ? { start } : {}),
  };
  return self;
}

/** A new holder for this process (a fresh token per acquire). */
export function newHolder(): Holder {
  return { ...identity(), token: randomUUID() };
}

/** Whether the holder may still be using the session. */
export function holderAlive(holder: Holder): boolean {
  const me = identity();
  if (holder.host !== me.host) return true;
  if (holder.boot && me.boot && holder.boot !== me.boot) return false;
  if (holder.pid === me.pid) return holder.start === me.start;
  try {
    process.kill(holder.pid, 0);
  } catch (error) {
    // EPERM: the pid exists and belongs to another user.
    if ((error as NodeJS.ErrnoException).code === "ESRCH") return false;
  }
  const stat = procStat(holder.pid);
  if (stat === undefined) return readText("/proc/self/stat") === undefined; // no /proc: trust the pid
  if (stat.state === "Z" || stat.state === "X") return false;
  return holder.start === undefined || stat.start === holder.start;
}

/** The holder stored as text; undefined (nobody we could recognise) for anything else. */
export function parseHolder(text: string): Holder | undefined {
  try {
    const holder = JSON.parse(text) as Holder;
    return Number.isInteger(holder?.pid) && holder.pid > 0 && typeof holder.host === "string"
      ? holder
      : undefined;
  } catch {
    return undefined;
  }
}

export function describeHolder(holder: Holder): string {
  const me = identity();
  if (holder.host !== me.host) return `process ${holder.pid} on ${holder.host}`;
  return holder.pid === me.pid ? "this process" : `process ${holder.pid}`;
}
