// Sub-agents' cost (issue 24): one delegation (a child run of one iteration) against a direct tool
// call, and an iteration inside a child against one of the top-level loop. Fake models that answer
// at once, a synchronous tool; runners interleaved round by round in one process; a sample is CPU
// µs (user + system) per run or per iteration, over many runs. `node bench/subagents.ts` prints the
// section alone.
import { Agent, defineTool } from "../dist/index.js";
import { medianRange, type Section } from "./section.ts";

const usage = { inputTokens: 0, outputTokens: 0 };

/** A model that calls `call` on its first `calls` turns of a run (its counter reset by `reset`), then answers. */
export function turns(calls: number, call: (i: number) => { name: string; arguments: string }) {
  let turn = 0;
  return {
    reset: () => {
      turn = 0;
    },
    model: {
      id: "fake",
      async *stream() {
        const i = turn++;
        yield i < calls
          ? {
              type: "done" as const,
              message: {
                content: "",
                toolCalls: [{ id: `c${i}`, ...call(i) }],
                finishReason: "tool_calls",
                usage,
              },
            }
          : {
              type: "done" as const,
              message: { content: "done", toolCalls: [], finishReason: "stop", usage },
            };
      },
    },
  };
}

export const add = defineTool({
  name: "add",
  description: "Adds two numbers.",
  parameters: { type: "object", properties: { a: { type: "number" }, b: { type: "number" } } },
  execute: (args: unknown) => {
    const { a, b } = args as { a: number; b: number };
    return a + b;
  },
});
export const addCall = (i: number) => ({ name: "add", arguments: `{"a":${i},"b":2}` });

/** A runner: what one run does, and how many iterations of interest it has. */
interface Runner {
  run(): Promise<unknown>;
}

function direct(): Runner {
  const m = turns(1, addCall);
  const agent = new Agent({ model: m.model, tools: [add] });
  return {
    run: () => {
      m.reset();
      return agent.run("go");
    },
  };
}

function delegated(childIterations: number): Runner {
  const child = turns(childIterations - 1, addCall);
  const top = turns(1, () => ({ name: "delegate_task", arguments: '{"agent":"child","task":"go"}' }));
  const worker = new Agent({ model: child.model, tools: [add], maxIterations: childIterations + 1 });
  const agent = new Agent({ model: top.model, agents: { child: worker } });
  return {
    run: () => {
      child.reset();
      top.reset();
      return agent.run("go");
    },
  };
}

function loop(iterations: number): Runner {
  const m = turns(iterations - 1, addCall);
  const agent = new Agent({ model: m.model, tools: [add], maxIterations: iterations + 1 });
  return {
    run: () => {
      m.reset();
      return agent.run("go");
    },
  };
}

/** CPU µs per unit of `runs` runs of `runner`. */
async function sample(runner: Runner, runs: number, units: number): Promise<number> {
  const start = process.cpuUsage();
  for (let i = 0; i < runs; i++) await runner.run();
  const used = process.cpuUsage(start);
  return (used.user + used.system) / (runs * units);
}

export async function subAgentCost(rounds = 11): Promise<Section> {
  const N = 100;
  const runners = {
    direct: direct(),
    delegated: delegated(1),
    loop: loop(N),
    child: delegated(N),
  };
  const s = {
    direct: [] as number[],
    delegated: [] as number[],
    loop: [] as number[],
    child: [] as number[],
  };
  const added: number[] = [];
  const ratio: number[] = [];
  // Warm-up: compiled code for every path.
  for (const runner of Object.values(runners)) await sample(runner, 200, 1);
  for (let r = 0; r < rounds; r++) {
    const d = await sample(runners.direct, 2000, 1);
    const g = await sample(runners.delegated, 2000, 1);
    const l = await sample(runners.loop, 40, N);
    const c = await sample(runners.child, 40, N);
    s.direct.push(d);
    s.delegated.push(g);
    s.loop.push(l);
    s.child.push(c);
    added.push(g - d);
    ratio.push(c / l);
  }
  const markdown = `### Sub-agents (bench/subagents.ts)

Fake models that answer at once and a synchronous tool, the runners interleaved round by round in one
process, ${rounds} rounds; CPU µs, median [min-max]. One delegation: a top-level run of two iterations
whose first calls \`add\` directly, against the same run calling \`delegate_task\` for a child that answers
in one iteration (the child's own run: its state, loop, events tagged and forwarded, its usage added to
its parent's). An iteration inside a child: a child looping ${N} iterations of \`add\` under one delegation,
against the top-level loop doing the same, per iteration.

| what | µs |
| --- | ---: |
| a run with a direct tool call | ${medianRange(s.direct)} |
| the same run delegating the call to a one-iteration child | ${medianRange(s.delegated)} |
| added by one delegation | ${medianRange(added)} |
| an iteration of the top-level loop (N = ${N}) | ${medianRange(s.loop)} |
| an iteration inside a child (N = ${N}) | ${medianRange(s.child)} |
| child / top-level, per iteration | ${medianRange(ratio, 2, "x")} |`;
  return { markdown, targets: [] };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  process.stdout.write(`${(await subAgentCost()).markdown}\n`);
}
