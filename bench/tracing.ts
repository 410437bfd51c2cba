// Tracing's cost per iteration (issue 25, SPEC section 11): the same run of N iterations of `add`
// with no OpenTelemetry SDK registered (the API's no-op: what every library user pays), with an SDK
// whose sampler records nothing, and with an SDK recording every span into an exporter that drops
// them (the SDK's own work, not the network's). Fake model that answers at once, a synchronous tool;
// the three interleaved round by round in one process; a sample is CPU µs (user + system) per
// iteration. `node bench/tracing.ts` prints the section alone.
import { AlwaysOffSampler, SimpleSpanProcessor, TracerProvider } from "@opentelemetry/sdk-trace";
import { Agent } from "../dist/index.js";
import { medianRange, type Section } from "./section.ts";
import { add, addCall, turns } from "./subagents.ts";

/** An exporter that takes every span and keeps none: the SDK's cost without a network. */
const dropping = {
  export(_spans: unknown[], done: (result: { code: number }) => void) {
    done({ code: 0 });
  },
  shutdown: async () => {},
};

type Mode = "no SDK" | "SDK, not sampling" | "SDK, exporting";

function runner(n: number, mode: Mode) {
  const m = turns(n - 1, addCall);
  const tracerProvider =
    mode === "no SDK"
      ? undefined
      : mode === "SDK, not sampling"
        ? new TracerProvider({ sampler: new AlwaysOffSampler() })
        : new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter: dropping })] });
  const agent = new Agent({
    model: m.model,
    tools: [add],
    maxIterations: n + 1,
    ...(tracerProvider && { tracerProvider }),
  });
  return async () => {
    m.reset();
    await agent.run("go");
  };
}

async function sample(run: () => Promise<void>, runs: number, n: number): Promise<number> {
  const start = process.cpuUsage();
  for (let i = 0; i < runs; i++) await run();
  const used = process.cpuUsage(start);
  return (used.user + used.system) / (runs * n);
}

export async function tracingCost(rounds = 11): Promise<Section> {
  const N = 100;
  const modes: Mode[] = ["no SDK", "SDK, not sampling", "SDK, exporting"];
  const runs = modes.map((mode) => runner(N, mode));
  const samples: number[][] = modes.map(() => []);
  for (const run of runs) await sample(run, 50, N); // warm-up
  for (let r = 0; r < rounds; r++) {
    for (let i = 0; i < runs.length; i++)
      samples[i]?.push(await sample(runs[i] as () => Promise<void>, 40, N));
  }
  const base = samples[0] as number[];
  const rows = modes.map((mode, i) => {
    const s = samples[i] as number[];
    const ratios = s.map((v, r) => v / (base[r] as number));
    return `| ${mode} | ${medianRange(s)} | ${i === 0 ? "1" : medianRange(ratios, 2)}x |`;
  });
  const markdown = `### Tracing (bench/tracing.ts)

A run of ${N} iterations of \`add\` with a fake model that answers at once, ${rounds} rounds interleaved in
one process; CPU µs per iteration, median [min-max], and the ratio to the run with no SDK in the same
round. "No SDK": nothing registered with \`@opentelemetry/api\` (what a library user who does not trace
pays: a run checks once that no provider is registered and makes no trace object); "not sampling": an
SDK whose sampler drops every span (spans are made, attributes are not); "exporting": an SDK recording
every span (one \`invoke_agent\`, ${N} \`chat\` and ${N - 1} \`execute_tool\`) into an exporter that drops them.

| mode | µs per iteration | to no SDK |
| --- | ---: | ---: |
${rows.join("\n")}`;
  return { markdown, targets: [] };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  process.stdout.write(`${(await tracingCost(Number(process.argv[2] ?? 11))).markdown}\n`);
}
