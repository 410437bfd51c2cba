import { createInterface } from "node:readline";
import type { Message } from "../core/messages.js";
import type { CliFlags } from "./config.js";
import { progressRenderer, stopLine } from "./render.js";
import { setupAgent } from "./run.js";

const HELP =
  "Commands: /reset (new conversation), /tools (list tools), /exit (or Ctrl+D). Ctrl+C stops the answer.";
const SPINNER = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

/**
 * `agentloop chat`: a multi-turn conversation in the terminal. Answers stream as they are
 * generated, tool calls show compactly with their durations, Ctrl+C stops the current answer
 * and a second Ctrl+C (at the prompt) exits. Resolves to the exit code.
 */
export async function chatCommand(flags: CliFlags): Promise<number> {
  const { settings, agent, close } = await setupAgent(flags);
  const out = process.stdout;
  const tty = out.isTTY === true;
  const dim = (s: string) => (tty ? `\x1b[2m${s}\x1b[22m` : s);
  const write = (text: string) => out.write(text);
  const rl = createInterface({ input: process.stdin, output: out, terminal: process.stdin.isTTY === true });

  let history: Message[] = [];
  let turn: AbortController | undefined;
  let armedExit = false;
  let closed = false;
  rl.on("SIGINT", () => {
    if (turn) {
      turn.abort();
      return;
    }
    if (armedExit) rl.close();
    else {
      armedExit = true;
      write(`\n${dim("(press Ctrl+C again to exit)")}\n`);
      rl.prompt();
    }
  });
  rl.on("close", () => {
    closed = true;
  });

  write(dim(`agentloop chat · ${settings.model} · ${HELP}\n`));
  rl.setPrompt("› ");
  rl.prompt();
  for await (const raw of rl) {
    armedExit = false;
    const line = raw.trim();
    if (line === "") {
      rl.prompt();
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
    if (closed) break;
    rl.prompt();
  }
  rl.close();
  await close();
  return 0;

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
      const events = agent.stream(input, { signal: turn.signal, history });
      while (true) {
        const next = await events.next();
        if (next.done) {
          stopSpinner();
          const result = next.value;
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
            write(`${dim(reason.replace(/^agentloop: /, "(") + ")")}\n`);
          return result.messages;
        }
        const event = next.value;
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
    } finally {
      stopSpinner();
      turn = undefined;
    }
  }
}
