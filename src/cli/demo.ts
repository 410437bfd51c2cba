import { Agent } from "../agent/agent.js";
import { DEMO_QUESTIONS, demoModel } from "../testing/demo-model.js";
import { builtinTools } from "../tools/builtin/index.js";
import { EXIT_CODES, progressRenderer, stopLine } from "./render.js";

export interface DemoFlags {
  json?: boolean;
}

/**
 * `agentloop demo`: a first run that needs nothing. The demo's scripted model (no key, no network)
 * answers `DEMO_QUESTIONS` with the real built-in tools, each run shown as `agentloop run` shows
 * one: the question and the progress on stderr, the answer on stdout (`--json`: the events on
 * stdout instead). Resolves to the exit code: 0, or the first run's that did not answer.
 */
export async function demoCommand(flags: DemoFlags): Promise<number> {
  const err = (line: string) => process.stderr.write(`${line}\n`);
  const color = process.stderr.isTTY === true;
  const bold = (text: string) => (color ? `\x1b[1m${text}\x1b[22m` : text);
  const agent = new Agent({ model: demoModel(), tools: builtinTools() });
  if (!flags.json) {
    err(
      "agentloop demo: a scripted model stands in for a real one (no API key, no network); the tools are the real built-ins.",
    );
  }
  const progress = flags.json ? undefined : progressRenderer(err, color);
  let exitCode = 0;
  for (const question of DEMO_QUESTIONS) {
    if (!flags.json) err(`\n${bold(`> ${question}`)}`);
    const run = agent.stream(question);
    for await (const event of run) {
      if (flags.json) await out(`${JSON.stringify(event)}\n`);
      progress?.(event);
    }
    const result = await run.result;
    if (!flags.json) {
      await out(`${result.text}\n`);
      const line = stopLine(result.stopReason, result.iterations, result.error);
      if (line) err(line);
    }
    if (exitCode === 0) exitCode = EXIT_CODES[result.stopReason];
  }
  if (!flags.json) {
    err(
      '\nWith a model of your own: set OPENAI_API_KEY and run: npx agentloop-runtime run "What is 157.09 * 493.89?" (with Ollama, no key: add --base-url http://localhost:11434/v1 --model llama3.1)',
    );
  }
  return exitCode;
}

/** Writes to stdout, waiting for a full pipe to drain. */
function out(text: string): Promise<void> {
  return new Promise((resolve) => {
    if (process.stdout.write(text)) resolve();
    else process.stdout.once("drain", resolve);
  });
}
