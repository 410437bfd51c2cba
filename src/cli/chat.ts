import { createInterface, type Interface } from "node:readline";
import type { Agent } from "../agent/agent.js";
import type { Message } from "../core/messages.js";
import type { CliFlags } from "./config.js";
import { EXIT_CODES, progressRenderer, stopLine } from "./render.js";
import { STOP_SIGNALS, setupAgent } from "./run.js";

const HELP =
  "Commands: /reset (new conversation), /tools (list tools), /exit (or Ctrl+D). Ctrl+C stops the answer.";
const SPINNER = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

/**
 * `agentloop chat`: a multi-turn conversation in the terminal. Answers stream as they are
 * generated, tool calls show compactly with their durations, Ctrl+C stops the current answer
 * and a second Ctrl+C (at the prompt) exits. Piped input is read line by line, each line a
 * turn, until its end (exit 0). SIGTERM or SIGHUP (and Ctrl+C when stdin is not a terminal)
 * stop the answer in flight, close the tools and exit 130. Resolves to the exit code.
 */
export async function chatCommand(flags: CliFlags): Promise<number> {
  const interactive = process.stdin.isTTY === true;
  let stopped = false;
  let turn: AbortController | undefined;
  let rl: Interface | undefined;
  const stop = () => {
    if (stopped) process.exit(EXIT_CODES.aborted);
    stopped = true;
    turn?.abort();
    rl?.close();
  };
  const signals = interactive ? STOP_SIGNALS.filter((s) => s !== "SIGINT") : STOP_SIGNALS;
  for (const signal of signals) process.on(signal, stop);
  try {
    const { settings, agent, close } = await setupAgent(flags);
    try {
      if (!stopped) await converse(settings.model, agent);
    } finally {
      await close();
    }
  } finally {
    for (const signal of signals) process.off(signal, stop);
  }
  return stopped ? EXIT_CODES.aborted : 0;

  async function converse(model: string, agent: Agent): Promise<void> {
    const out = process.stdout;
    const tty = out.isTTY === true;
    const dim = (s: string) => (tty ? `\x1b[2m${s}\x1b[22m` : s);
    const write = (text: string) => out.write(text);
    const lines = createInterface({ input: process.stdin, output: out, terminal: interactive });
    rl = lines;
    // The prompt and the banner are for people at a keyboard, not for piped input.
    const prompt = () => {
      if (interactive) lines.prompt();
    };

    let history: Message[] = [];
    let armedExit = false;
    lines.on("SIGINT", () => {
      if (turn) {
        turn.abort();
        return;
      }
      if (armedExit) lines.close();
      else {
        armedExit = true;
        write(`\n${dim("(press Ctrl+C again to exit)")}\n`);
        prompt();
      }
    });

    if (interactive) write(dim(`agentloop chat · ${model} · ${HELP}\n`));
    lines.setPrompt("› ");
    prompt();
    // Lines typed or piped while an answer streams wait in the iterator's queue; the loop
    // ends when the input does (after the queued lines) or on a stop.
    for await (const raw of lines) {
      armedExit = false;
      const line = raw.trim();
      if (line === "") {
        prompt();
        continue;
      }
      if (line === "/exit" || line === "/quit") break;
      if (line === "/help") write(`${HELP}\n`);
      else if (line === "/reset") {
        history = [];
        write(dim("New conversation.\n"));
      } else if (line === "/tools") {
        for (const tool of agent.tools) write(`${tool.name}  ${dim(tool.description)}\n`);
      } else if (line.startsWith("/")) {
        write(`Unknown command ${line}. ${HELP}\n`);
      } else {
        history = await runTurn(line);
      }
      if (stopped) break;
      prompt();
    }
    lines.close();

    async function runTurn(input: string): Promise<Message[]> {
      turn = new AbortController();
      const progress = progressRenderer((text) => write(`${text}\n`), tty);
      let spinner: NodeJS.Timeout | undefined;
      let frame = 0;
      const startSpinner = () => {
        if (!tty || spinner) return;
        spinner = setInterval(() => write(`\r${dim(`${SPINNER[frame++ % SPINNER.length]} thinking`)}`), 80);
      };
      const stopSpinner = () => {
        if (!spinner) return;
        clearInterval(spinner);
        spinner = undefined;
        write("\r\x1b[K");
      };
      let midLine = false;
      try {
        const run = agent.stream(input, { signal: turn.signal, history });
        for await (const event of run) {
          if (event.type === "iteration_start") startSpinner();
          else if (event.type === "message_delta") {
            stopSpinner();
            write(event.text);
            midLine = !event.text.endsWith("\n");
          } else if (event.type === "tool_call" || event.type === "tool_result" || event.type === "error") {
            stopSpinner();
            if (midLine) write("\n");
            midLine = false;
            progress(event);
          }
        }
        stopSpinner();
        const result = await run.result;
        if (midLine) write("\n");
        if (
          result.stopReason === "ask_question" ||
          result.stopReason === "task_completion" ||
          result.stopReason === "converse"
        ) {
          write(`${result.stopReason === "ask_question" ? "? " : ""}${result.output}\n`);
        }
        const reason = stopLine(result.stopReason, result.iterations, result.error);
        if (reason && result.stopReason !== "ask_question")
          write(`${dim(`${reason.replace(/^agentloop: /, "(")})`)}\n`);
        return result.messages;
      } finally {
        stopSpinner();
        turn = undefined;
      }
    }
  }
}
