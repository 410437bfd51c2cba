import type { AgentOptions } from "../agent/agent.js";
import { AgentloopError } from "../core/errors.js";
import { askKeyOnStderr, askOnStderr, terminalApprover } from "./approval.js";
import { settingsFrom, setupAgent } from "./compose.js";
import type { CliFlags } from "./config.js";
import { exitNow } from "./exit.js";
import { readImages } from "./inputs.js";
import { STOP_SIGNALS } from "./interrupt.js";
import { EXIT_CODES } from "./render.js";
import { runTurn } from "./run-turn.js";
import {
  checkSessionId,
  forceWithoutSession,
  type HeldSession,
  holdSession,
  planRun,
  sessionLost,
  startPlan,
  stopWhenLost,
  storeFailure,
} from "./session-run.js";

/**
 * `agentloop run`: one task, or (with `--session`) the session's next step: a new prompt, the
 * answer to its question, decisions on its waiting calls, or the resume of its interrupted run.
 * The answer goes to stdout, progress to stderr. Resolves to the exit code.
 */
export async function runCommand(prompt: string | undefined, flags: CliFlags): Promise<number> {
  if (flags.session !== undefined) checkSessionId(flags.session);
  // Without a session the flags alone say whether the command makes sense: fail before starting anything.
  if (flags.session === undefined) planRun(undefined, { ...request(prompt, flags), canDecide: true });
  if (flags.session === undefined && flags.force) throw forceWithoutSession();
  const images = readImages(flags.image);
  // Listening from the start: a signal while the MCP servers start (or wait for a sign-in in the
  // browser) gives up their start at once (exit 130, one line); later, it aborts the run.
  const controller = new AbortController();
  const onSignal = () => {
    // A second signal stops at once; the MCP children are ended on exit (mcp/children.ts).
    if (controller.signal.aborted) exitNow(EXIT_CODES.aborted);
    controller.abort();
  };
  for (const signal of STOP_SIGNALS) process.on(signal, onSignal);
  let held: HeldSession | undefined;
  try {
    const settings = await settingsFrom(flags);
    const allowed = new Set<string>();
    const onApproval: AgentOptions["onApproval"] = flags.yes
      ? () => "approve"
      : interactive(flags)
        ? terminalApprover(
            askKeyOnStderr(controller.signal),
            (text) => process.stderr.write(text),
            process.stderr.isTTY === true,
            (tool) => allowed.add(tool),
          )
        : undefined;
    const asked = { ...request(prompt, flags), canDecide: onApproval !== undefined };
    if (flags.session !== undefined) {
      held = await holdSession(settings, flags.session, (fresh) => planRun(fresh, asked), flags.force);
      stopWhenLost(held, () => controller.abort());
    }
    const session = held?.session;
    for (const tool of session?.lastRun?.allowedTools ?? []) allowed.add(tool);
    const plan = planRun(session, asked);
    if (images.length > 0 && plan.type !== "new") {
      throw new AgentloopError(
        "usage",
        `--image goes with a new prompt; session '${session?.id}' continues a waiting run: send the images with the next prompt.`,
      );
    }
    // Only MCP servers ask for input: without them, the form code (and the MCP SDK it uses) stays unloaded.
    const onElicitation =
      Object.keys(settings.mcpServers).length === 0
        ? undefined
        : (await import("./elicitation.js")).cliElicitation({
            mode: settings.elicitation,
            yes: flags.yes === true,
            ...(interactive(flags) && {
              terminal: {
                ask: askOnStderr(controller.signal),
                write: (text: string) => process.stderr.write(text),
                color: process.stderr.isTTY === true,
              },
            }),
            note: (line) => process.stderr.write(`${line}\n`),
            hint: "nobody can answer it here (run in a terminal to be asked, or pass --yes to accept a form whose required fields have defaults)",
          });
    const { agent, close } = await setupAgent(flags, {
      settings,
      catalogueNotes: false,
      signal: controller.signal,
      ...(onElicitation && { onElicitation }),
      ...(onApproval && { onApproval }),
    });
    try {
      const start = { signal: controller.signal, session, allowedTools: [...allowed] };
      const turn = {
        flags,
        timeLimitMs: settings.timeoutMs,
        stoppedHere: () => controller.signal.aborted,
        failure: (error: unknown) => (held ? storeFailure(error, held.session.id, held) : error),
      };
      let result = await runTurn(
        startPlan(agent, plan, { ...start, history: session?.messages ?? [], images }),
        turn,
      );
      if (plan.type === "decide" && plan.thenPrompt !== undefined) {
        if (result.state.status !== "completed") {
          process.stderr.write(
            "agentloop: your prompt was not sent: the run it continued is waiting again\n",
          );
        } else {
          const next = { type: "new" as const, prompt: plan.thenPrompt };
          const history = result.messages;
          result = await runTurn(
            startPlan(agent, next, { ...start, allowedTools: [...allowed], history }),
            turn,
          );
        }
      }
      if (held?.session.lost?.aborted) throw sessionLost(held.session.id);
      return EXIT_CODES[result.stopReason];
    } finally {
      await close();
    }
  } catch (error) {
    throw held ? storeFailure(error, held.session.id, held) : error;
  } finally {
    await held?.close();
    for (const signal of STOP_SIGNALS) process.off(signal, onSignal);
  }
}

const request = (prompt: string | undefined, flags: CliFlags) => ({
  prompt,
  resume: flags.resume,
  approve: flags.approve,
  deny: flags.deny,
});

/** A person can be asked: stdin and stderr are terminals and stdout is not the event stream. */
const interactive = (flags: CliFlags) =>
  process.stdin.isTTY === true && process.stderr.isTTY === true && !flags.json;
