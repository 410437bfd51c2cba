// Which calls need a person's approval (config `approval` lists over the tools' own rules), how
// a terminal asks for it, and how a run that waits says what to do next.
import { createInterface, emitKeypressEvents } from "node:readline";
import type { ApprovalDecision } from "../agent/run.js";
import type { PendingApproval } from "../core/events.js";
import { globMatcher } from "../tools/glob.js";
import type { Tool } from "../tools/tool.js";
import type { Settings } from "./config.js";

export { globMatcher };

/**
 * The tools with config `approval` applied: a name in `allow` never asks unless the tool itself
 * says it needs approval (`allow` wins over an MCP `destructiveHint`, never over `needsApproval`);
 * a name in `require` (and not in `allow`) always asks. Tools no list names are returned as they are.
 */
export function approvalRules(rules: Settings["approval"]): (tools: readonly Tool[]) => readonly Tool[] {
  if (rules.require.length === 0 && rules.allow.length === 0) return (tools) => tools;
  const allowed = globMatcher(rules.allow);
  const required = globMatcher(rules.require);
  const cache = new WeakMap<Tool, Tool>();
  const apply = (tool: Tool): Tool => {
    if (allowed(tool.name)) {
      return tool.needsApproval === undefined && tool.annotations?.destructiveHint === true
        ? { ...tool, needsApproval: false }
        : tool;
    }
    return required(tool.name) ? { ...tool, needsApproval: true } : tool;
  };
  return (tools) =>
    tools.map((tool) => {
      let ruled = cache.get(tool);
      if (!ruled) {
        ruled = apply(tool);
        cache.set(tool, ruled);
      }
      return ruled;
    });
}

/** A call as a person reads it: the tool, then each argument on a line, values cut short. */
export function describeCall(call: PendingApproval, color: boolean): string {
  const bold = (s: string) => (color ? `\x1b[1m${s}\x1b[22m` : s);
  const dim = (s: string) => (color ? `\x1b[2m${s}\x1b[22m` : s);
  const entries = Object.entries(call.arguments);
  const lines = entries
    .slice(0, 12)
    .map(([key, value]) => `    ${key}: ${short(JSON.stringify(value) ?? "")}`);
  if (entries.length > 12) lines.push(`    … ${entries.length - 12} more`);
  if (entries.length === 0) lines.push("    (no arguments)");
  const agent = call.agent === undefined ? "" : `${bold(call.agent)} (sub-agent): `;
  return `${agent}${bold(call.name)} wants to run ${dim(`(${call.id})`)}\n${lines.join("\n")}`;
}

function short(text: string, max = 160): string {
  const flat = text.length > max * 4 ? text.slice(0, max * 4) : text;
  return flat.length > max ? `${flat.slice(0, max - 1)}… (${text.length} characters)` : flat;
}

/**
 * `onApproval` for a person at a terminal: shows the call, asks y / n / a until one of them is
 * given. `ask` reads one answer (undefined when the input ended or the run was stopped: then the
 * call is denied). `a` returns "always" (that tool runs without asking for the rest of the run)
 * and tells `remember`, which keeps it for the session.
 */
export function terminalApprover(
  ask: (question: string) => Promise<string | undefined>,
  write: (text: string) => void,
  color: boolean,
  remember: (tool: string) => void,
): (call: PendingApproval) => Promise<ApprovalDecision> {
  return async (call) => {
    write(`${describeCall(call, color)}\n`);
    for (;;) {
      const answer = await ask(`Run it? [y]es, [n]o, [a]lways allow ${call.name}: `);
      const key = answer?.trim().toLowerCase();
      if (key === undefined || key === "n" || key === "no") return "deny";
      if (key === "y" || key === "yes") return "approve";
      if (key === "a" || key === "always") {
        remember(call.name);
        return "always";
      }
      write("Type y to run it, n to decline it, a to allow this tool for the rest of the session.\n");
    }
  };
}

/** One answer read from stdin with the question on stderr (for `run`); undefined at the input's end or on `signal`. */
export function askOnStderr(signal: AbortSignal): (question: string) => Promise<string | undefined> {
  return (question) =>
    new Promise((resolve) => {
      if (signal.aborted) return resolve(undefined);
      const rl = createInterface({ input: process.stdin, output: process.stderr, terminal: true });
      let answered = false;
      const done = (answer: string | undefined) => {
        if (answered) return;
        answered = true;
        signal.removeEventListener("abort", stop);
        rl.close();
        resolve(answer);
      };
      const stop = () => {
        if (!answered) process.stderr.write("\n");
        done(undefined);
      };
      signal.addEventListener("abort", stop, { once: true });
      // Ctrl+C at the question stops the run, as it does elsewhere.
      rl.on("SIGINT", () => process.kill(process.pid, "SIGINT"));
      rl.on("close", stop);
      rl.question(question, done);
    });
}

/**
 * One key read from stdin, a terminal, in raw mode (no Enter needed), with the question on stderr
 * (for `run`): the key's text; Enter and spaces are passed over (a "y" typed with Enter out of
 * habit answers once). Undefined at Ctrl+D or on `signal`; Ctrl+C stops the run, as elsewhere.
 */
export function askKeyOnStderr(signal: AbortSignal): (question: string) => Promise<string | undefined> {
  return (question) =>
    new Promise((resolve) => {
      if (signal.aborted) return resolve(undefined);
      const input = process.stdin;
      emitKeypressEvents(input);
      const raw = input.isRaw;
      const done = (answer: string | undefined) => {
        input.off("keypress", onKey);
        signal.removeEventListener("abort", stop);
        input.setRawMode(raw);
        input.pause();
        process.stderr.write(`${answer ?? ""}\n`);
        resolve(answer);
      };
      const stop = () => done(undefined);
      const onKey = (text: string | undefined, key: { name?: string; ctrl?: boolean } | undefined) => {
        if (key?.ctrl && key.name === "c") {
          done(undefined);
          process.kill(process.pid, "SIGINT");
        } else if (key?.ctrl && key.name === "d") done(undefined);
        else if (text !== undefined && text.trim() !== "" && !key?.ctrl) done(text);
      };
      signal.addEventListener("abort", stop, { once: true });
      process.stderr.write(question);
      input.setRawMode(true);
      input.on("keypress", onKey);
      input.resume();
    });
}

/**
 * The stderr line of a run that stopped with `approval_required`: the waiting calls and how to
 * continue (with the session's id), or how to make the run continuable (without one).
 */
export function approvalLine(pending: readonly PendingApproval[], sessionId: string | undefined): string {
  const calls = pending
    .map((call) => `${call.id} (${call.agent === undefined ? "" : `${call.agent}: `}${call.name})`)
    .join(", ");
  const ids = pending.map((call) => call.id).join(",");
  const waiting = `agentloop: approval_required: ${pending.length === 1 ? "1 call waits" : `${pending.length} calls wait`} for approval: ${calls}`;
  if (sessionId !== undefined) {
    return `${waiting}; continue with: agentloop run --session ${sessionId} --approve ${pending.length === 1 ? ids : `${ids} (or all)`}, or --deny ${pending.length === 1 ? ids : "<ids>|all"}`;
  }
  return `${waiting}; they did not run and nothing was stored: run the task again with --session <id> to decide later with --approve/--deny, or in a terminal to be asked, or with --yes to approve every call`;
}
