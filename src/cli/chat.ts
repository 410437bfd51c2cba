import { createInterface, type Interface } from "node:readline";
import type { Agent, AgentOptions } from "../agent/agent.js";
import type { RunHandle } from "../agent/handle.js";
import type { RunState } from "../agent/state.js";
import { AgentloopError } from "../core/errors.js";
import type { RunResult } from "../core/events.js";
import type { Message } from "../core/messages.js";
import { terminalApprover } from "./approval.js";
import { compactChat } from "./chat-compact.js";
import { expandPrompt, parsePromptLine, promptUsage } from "./chat-prompts.js";
import { renderTurn } from "./chat-turn.js";
import { type LoadedTools, settingsFrom, setupAgent } from "./compose.js";
import type { CliFlags } from "./config.js";
import { cliElicitation } from "./elicitation.js";
import { exitNow } from "./exit.js";
import { interruptible, STOP_SIGNALS } from "./interrupt.js";
import { EXIT_CODES } from "./render.js";
import {
  checkSessionId,
  forceWithoutSession,
  type HeldSession,
  holdSession,
  type Plan,
  planRun,
  sessionLost,
  startPlan,
  stopWhenLost,
  storeFailure,
} from "./session-run.js";

const HELP =
  "Commands: /reset (new conversation), /compact (summarise all but the latest exchange), /tools (list tools), /resume (continue an interrupted run), /exit (or Ctrl+D). Ctrl+C stops the answer.";

/**
 * `agentloop chat`: a multi-turn conversation in the terminal. Answers stream as they are
 * generated, tool calls show compactly with their durations, Ctrl+C stops the current answer
 * and a second Ctrl+C (at the prompt) exits. Piped input is read line by line, each line a
 * turn, until its end (exit 0). SIGTERM or SIGHUP (and Ctrl+C when stdin is not a terminal, or
 * once Ctrl+D ended the input) stop the answer in flight, close the tools and exit 130. With `--session`, the stored
 * conversation continues and every turn is stored as a run of the session. Calls that need
 * approval are asked about inline (y / n / a) in a terminal. Resolves to the exit code.
 */
export async function chatCommand(flags: CliFlags): Promise<number> {
  const interactive = process.stdin.isTTY === true;
  const live: Live = { stopped: false, ask: async () => undefined, askKey: async () => undefined };
  const stop = () => {
    if (live.stopped) exitNow(EXIT_CODES.aborted);
    live.stopped = true;
    live.turn?.abort();
    live.lines?.close();
  };
  if (flags.session !== undefined) checkSessionId(flags.session);
  // In a terminal the line reader takes Ctrl+C as a key (stopping the answer); a SIGINT reaches the
  // process only when it is not reading: before it starts, or after Ctrl+D closed it mid-answer.
  for (const signal of STOP_SIGNALS) process.on(signal, stop);
  let held: HeldSession | undefined;
  try {
    const settings = await settingsFrom(flags);
    const allowed = new Set<string>();
    const tty = process.stdout.isTTY === true;
    const onApproval: AgentOptions["onApproval"] = flags.yes
      ? () => "approve"
      : interactive
        ? terminalApprover(
            (question) => live.askKey(question),
            (text) => process.stdout.write(text),
            tty,
            (tool) => allowed.add(tool),
          )
        : undefined;
    // Flags that continue the session's run go first, and so does a run that waits for approvals.
    const canDecide = onApproval !== undefined;
    const continuing = { resume: flags.resume, approve: flags.approve, deny: flags.deny, canDecide };
    const given = flags.resume === true || flags.approve !== undefined || flags.deny !== undefined;
    if (flags.session !== undefined) {
      held = await holdSession(
        settings,
        flags.session,
        (fresh) => {
          if (given) planRun(fresh, continuing);
        },
        flags.force,
      );
      stopWhenLost(held, () => {
        live.turn?.abort();
        live.lines?.close();
      });
    }
    const session = held?.session;
    for (const tool of session?.lastRun?.allowedTools ?? []) allowed.add(tool);
    if (given && !session) planRun(undefined, continuing); // refused: they need a session
    if (flags.force && !session) throw forceWithoutSession();
    const first =
      session && (given || session.lastRun?.status === "awaiting_approval")
        ? planRun(session, continuing)
        : undefined;
    const onElicitation = cliElicitation({
      mode: settings.elicitation,
      yes: flags.yes === true,
      ...(interactive && {
        terminal: {
          ask: (question: string) => live.ask(question),
          write: (text: string) => process.stdout.write(text),
          color: tty,
        },
      }),
      note: (line) => process.stderr.write(`${line}\n`),
      hint: "nobody can answer it here (chat in a terminal to be asked, or pass --yes to accept a form whose required fields have defaults)",
    });
    // Ctrl+C while the MCP servers start (a sign-in in the browser included) gives up at once.
    const { agent, loaded, close } = await interruptible(
      (signal) =>
        setupAgent(flags, {
          settings,
          onElicitation,
          signal,
          catalogueNotes: false,
          ...(onApproval && { onApproval }),
        }),
      (made) => made.close(),
    );
    try {
      if (!live.stopped) {
        await converse(live, {
          flags,
          interactive,
          tty,
          model: settings.model,
          timeLimitMs: settings.timeoutMs,
          agent,
          loaded,
          session,
          first,
          allowed,
          canDecide,
        });
      }
    } finally {
      await close();
    }
    if (held?.session.lost?.aborted) throw sessionLost(held.session.id);
  } catch (error) {
    throw held ? storeFailure(error, held.session.id, held) : error;
  } finally {
    await held?.close();
    for (const signal of STOP_SIGNALS) process.off(signal, stop);
  }
  return live.stopped ? EXIT_CODES.aborted : 0;
}

/**
 * What the signal handlers, the approver and the input forms reach while the chat runs: the turn
 * in flight (Ctrl+C stops it), the line reader, and the questions asked through it (set once it
 * exists; until then nothing is asked).
 */
interface Live {
  stopped: boolean;
  turn?: AbortController;
  lines?: Interface;
  ask: (question: string, answered?: AbortSignal) => Promise<string | undefined>;
  /** An approval takes one key, without Enter. */
  askKey: (question: string) => Promise<string | undefined>;
}

/** What a conversation is had with, set up by `chatCommand`. */
interface Conversation {
  flags: CliFlags;
  /** stdin is a terminal: a person types (else the lines are piped). */
  interactive: boolean;
  /** stdout is a terminal. */
  tty: boolean;
  model: string;
  timeLimitMs: number | undefined;
  agent: Agent;
  loaded: LoadedTools;
  session: HeldSession["session"] | undefined;
  /** The plan the chat starts with (flags or a run that waits for approvals), before any line. */
  first: Plan | undefined;
  /** The tools allowed for the rest of the conversation. */
  allowed: Set<string>;
  canDecide: boolean;
}

/** The terminal loop: reads lines until the input ends, `/exit` or a stop; each a command or a turn. */
async function converse(live: Live, chat: Conversation): Promise<void> {
  const { flags, interactive, tty, agent, loaded, session, first, allowed, canDecide } = chat;
  const out = process.stdout;
  const dim = (s: string) => (tty ? `\x1b[2m${s}\x1b[22m` : s);
  const write = (text: string) => out.write(text);
  const lines = createInterface({ input: process.stdin, output: out, terminal: interactive });
  live.lines = lines;
  // Ctrl+D (the input's end) closes the line reader, at the prompt or mid-answer (which then
  // finishes, and the chat with it); so do a second Ctrl+C at the prompt and a stop.
  let inputEnded = false;
  let endedAtPrompt = false;
  lines.once("close", () => {
    inputEnded = true;
    endedAtPrompt = live.turn === undefined;
  });
  // The prompt and the banner are for people at a keyboard, not for piped input.
  const prompt = () => {
    if (interactive && !inputEnded) lines.prompt();
  };
  Object.assign(
    live,
    lineQuestions(lines, live, write, () => inputEnded),
  );

  let history: Message[] = session?.messages ?? [];
  let last: RunState | undefined = session?.lastRun;
  let armedExit = false;
  lines.on("SIGINT", () => {
    if (live.turn) {
      live.turn.abort();
      return;
    }
    if (armedExit) lines.close();
    else {
      armedExit = true;
      write(`\n${dim("(press Ctrl+C again to exit)")}\n`);
      prompt();
    }
  });

  if (interactive) {
    write(dim(`agentloop chat · ${chat.model} · ${HELP}\n`));
    if (session) write(dim(`Session ${session.id}: ${session.messages.length} messages stored.\n`));
    if (last?.status === "awaiting_answer" && !first) write(`? ${last.output}\n`);
    if (last?.status === "running" && !first)
      write(dim("The last run was interrupted: /resume continues it.\n"));
  }
  lines.setPrompt("› ");
  // Lines typed or piped while an answer streams wait in the iterator's queue (from now on,
  // also during a first run); the loop ends when the input does (after the queued lines) or on a stop.
  const input = lines[Symbol.asyncIterator]();
  if (first) await runPlan(first);
  prompt();
  for await (const raw of input) {
    armedExit = false;
    const line = raw.trim();
    if (line === "") {
      prompt();
      continue;
    }
    if (line === "/exit" || line === "/quit") break;
    await onLine(line);
    if (live.stopped) break;
    prompt();
  }
  // The input ended (Ctrl+D) or Ctrl+C was pressed twice at the prompt: the cursor is still on
  // the prompt's line, where the shell's prompt would land.
  if (interactive && endedAtPrompt && !live.stopped) write("\n");
  lines.close();

  /** A line other than `/exit`: a chat command, an MCP prompt, or a message to the agent. */
  async function onLine(line: string): Promise<void> {
    const named = line.startsWith("/") ? parsePromptLine(line, loaded.prompts()) : undefined;
    if (line === "/help") {
      write(`${HELP}\n`);
      const prompts = loaded.prompts();
      if (prompts.length > 0) write(`MCP prompts: ${prompts.map(promptUsage).join(", ")}\n`);
    } else if (named) {
      const text = await expandPrompt(named, {
        interactive,
        ask: (question) => live.ask(question),
        write,
        dim,
        getPrompt: (name, args) => loaded.getPrompt(name, args),
      });
      if (text !== undefined) {
        write(`${dim(text)}\n`);
        if (session) {
          const state = last;
          await planned(() => planRun({ id: session.id, lastRun: state }, { prompt: text, canDecide }));
        } else await runPlan({ type: "new", prompt: text });
      }
    } else if (line === "/reset") {
      if (session)
        write(dim("A session keeps its history: start another --session for a new conversation.\n"));
      else {
        history = [];
        last = undefined;
        allowed.clear();
        write(dim("New conversation.\n"));
      }
    } else if (line === "/compact") {
      await compactNow();
    } else if (line === "/tools") {
      for (const tool of agent.tools) write(`${tool.name}  ${dim(tool.description)}\n`);
    } else if (line === "/resume") {
      await planned(() =>
        planRun(session && { id: session.id, lastRun: last }, { resume: true, canDecide: true }),
      );
    } else if (line.startsWith("/")) {
      write(`Unknown command ${line}. ${HELP}\n`);
    } else if (session) {
      const state = last;
      await planned(() => planRun({ id: session.id, lastRun: state }, { prompt: line, canDecide }));
    } else {
      await runPlan({ type: "new", prompt: line });
    }
  }

  async function compactNow(): Promise<void> {
    const stopping = new AbortController();
    live.turn = stopping;
    try {
      const chat = { last, session, signal: stopping.signal };
      history = await compactChat(agent, history, chat, (line) => write(`${dim(line)}\n`));
    } finally {
      live.turn = undefined;
    }
  }

  /** A plan, or its usage error as a line (interactive) or the end of the chat (piped). */
  async function planned(make: () => Plan): Promise<void> {
    let plan: Plan;
    try {
      plan = make();
    } catch (error) {
      if (!interactive || !(error instanceof AgentloopError)) throw error;
      write(`${dim(`(${error.message})`)}\n`);
      return;
    }
    await runPlan(plan);
  }

  async function runPlan(plan: Plan): Promise<void> {
    const start = { session, allowedTools: [...allowed] };
    const result = await runTurn((signal) => startPlan(agent, plan, { ...start, signal, history }));
    if (plan.type === "decide" && plan.thenPrompt !== undefined && result.state.status === "completed") {
      const next = plan.thenPrompt;
      await runTurn((signal) =>
        startPlan(agent, { type: "new", prompt: next }, { ...start, signal, history }),
      );
    }
  }

  async function runTurn(begin: (signal: AbortSignal) => RunHandle): Promise<RunResult> {
    const stopping = new AbortController();
    live.turn = stopping;
    try {
      const result = await renderTurn(() => begin(stopping.signal), stopping.signal, {
        write,
        dim,
        tty,
        verbose: flags.verbose === true,
        timeLimitMs: chat.timeLimitMs,
        sessionId: session?.id,
      });
      history = result.messages;
      last = result.state;
      return result;
    } finally {
      live.turn = undefined;
    }
  }
}

/**
 * The questions asked through the chat's line reader: `ask` (a line; Ctrl+C, the turn's stop or
 * `answered` cancel it; once the input ended (`inputEnded`) nothing is asked) and `askKey`
 * (answered by the first key other than Enter or a space).
 */
function lineQuestions(
  lines: Interface,
  live: Live,
  write: (text: string) => void,
  inputEnded: () => boolean,
): Pick<Live, "ask" | "askKey"> {
  const ask: Live["ask"] = (question, answered) =>
    new Promise((resolve) => {
      const stop = live.turn?.signal ?? new AbortController().signal;
      if (stop.aborted || inputEnded()) return resolve(undefined);
      const signal = answered ? AbortSignal.any([stop, answered]) : stop;
      // Ctrl+C cancels the question (readline drops it, so the next line is a message again);
      // so does the key that answered it (readline then clears its line). Ctrl+D (the input
      // ends) answers nothing, as in `run`: the call is declined, the answer goes on.
      const cancelled = () => {
        if (stop.aborted) write("\n");
        settle(undefined);
      };
      const ended = () => {
        write("\n");
        settle(undefined);
      };
      const settle = (answer: string | undefined) => {
        signal.removeEventListener("abort", cancelled);
        lines.off("close", ended);
        resolve(answer);
      };
      signal.addEventListener("abort", cancelled, { once: true });
      lines.once("close", ended);
      lines.question(question, { signal }, settle);
    });
  // The line reader sees the key first and types it into its line; cancelling the question clears the line.
  const askKey: Live["askKey"] = (question) =>
    new Promise((resolve) => {
      const answered = new AbortController();
      const onKey = (text: string | undefined, key: { ctrl?: boolean; meta?: boolean } | undefined) => {
        if (text === undefined || text.trim() === "" || key?.ctrl || key?.meta) return;
        resolve(text);
        answered.abort();
      };
      process.stdin.on("keypress", onKey);
      ask(question, answered.signal).then((answer) => {
        process.stdin.off("keypress", onKey);
        resolve(answer);
      });
    });
  return { ask, askKey };
}
