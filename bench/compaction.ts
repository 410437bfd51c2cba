// Compaction's cost beside the model call (SPEC section 13, issue 27), at 1,000 and 10,000 messages:
//
//   npm run build && node bench/compaction.ts
//
// - deciding: the check before every model call of a run with compaction on (`over`: is the
//   request past `at` x maxContextTokens?), as the history grows one message at a time, reusing the
//   run's counts: the median and worst of the last 50 checks before each size (amortised O(1)), and
//   the first check of a history that size (counted from scratch, as after a resume);
// - applying: one compaction of everything before the latest user message (`agent.compact`: plan,
//   transcript, the summary put in place, the tokens before and after), with a model that answers
//   at once, so what is measured is everything but the model call. Median of 5.
import type { Message } from "../dist/core/messages.js";
import { Agent } from "../dist/index.js";
import { loopContext, newContextMemo } from "../dist/memory/prune.js";
import { scriptedModel } from "../dist/testing/index.js";
import type { Section } from "./section.ts";

const SIZES = [1_000, 10_000];
const WINDOW = 50;
const system = "You are a careful assistant. Use the tools when they help. ".repeat(8);
const tools = [
  { name: "calculator", description: "Evaluates arithmetic.", parameters: { type: "object" } },
  { name: "read_file", description: "Reads a file.", parameters: { type: "object" } },
];

// A deterministic mix of turns (as bench/pruning.ts), so every run measures the same history.
let seed = 42;
function random(): number {
  seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
  return seed / 2_147_483_648;
}
function text(): string {
  const words = ["the", "result", "is", "42", "file", "contents", "of", "src/index.ts", "error", "value"];
  return Array.from(
    { length: 5 + Math.floor(random() * 150) },
    () => words[Math.floor(random() * words.length)],
  ).join(" ");
}
function turn(index: number): Message[] {
  const kind = random();
  if (kind < 0.2) return [{ role: "user", content: text() }];
  if (kind < 0.4) return [{ role: "assistant", content: text() }];
  const calls = Array.from({ length: 1 + Math.floor(random() * 3) }, (_, i) => ({
    id: `call_${index}_${i}`,
    name: i % 2 ? "read_file" : "calculator",
    arguments: JSON.stringify({ expression: text().slice(0, 40) }),
  }));
  return [
    { role: "assistant", content: "", toolCalls: calls },
    ...calls.map(
      (call): Message => ({
        role: "tool",
        toolCallId: call.id,
        name: call.name,
        content: text(),
        isError: false,
      }),
    ),
  ];
}
function historyOf(size: number): Message[] {
  const history: Message[] = [{ role: "user", content: "the task" }];
  for (let i = 0; history.length < size - 1; i++) history.push(...turn(i));
  history.length = size - 1;
  while (history.at(-1)?.role === "tool" || history.at(-1)?.role === "assistant") history.pop();
  while (history.length < size - 1) history.push({ role: "assistant", content: text() });
  history.push({ role: "user", content: "the latest request" });
  return history;
}

const median = (values: number[]) =>
  [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] as number;
const us = (ms: number) => `${(ms * 1000).toFixed(1)} µs`;

function deciding(size: number): { median: number; worst: number; cold: number } {
  // A budget the history passes early: every check past that point is a real "over" check.
  const context = loopContext({ modelId: "gpt-4o-mini", maxContextTokens: 8_000 });
  const counts = context.compaction;
  if (!counts) throw new Error("no compaction counts");
  const full = historyOf(size);
  const memo = newContextMemo();
  const growing: Message[] = [];
  const times: number[] = [];
  for (const message of full) {
    growing.push(message);
    const start = performance.now();
    counts.over(growing, system, tools, memo, 0.8);
    if (growing.length > size - WINDOW) times.push(performance.now() - start);
  }
  const start = performance.now();
  counts.over(full.slice(), system, tools, newContextMemo(), 0.8);
  const cold = performance.now() - start;
  return { median: median(times), worst: Math.max(...times), cold };
}

async function applying(size: number): Promise<number> {
  const model = scriptedModel(() => ({ text: "SUMMARY of the earlier work." }));
  const agent = new Agent({ model, maxContextTokens: 8_000, compaction: {} });
  const history = historyOf(size);
  const times: number[] = [];
  for (let i = 0; i < 5; i++) {
    const start = performance.now();
    const done = await agent.compact(history);
    times.push(performance.now() - start);
    if (done.status !== "compacted") throw new Error(`not compacted: ${done.status}`);
  }
  return median(times);
}

/** The section of BENCHMARKS.md: deciding and applying one compaction at each size. */
export async function compactionCost(): Promise<Section> {
  const rows: string[] = [];
  for (const size of SIZES) {
    const d = deciding(size);
    const a = await applying(size);
    rows.push(
      `| ${size.toLocaleString("en")} | ${us(d.median)} | ${us(d.worst)} | ${us(d.cold)} | ${us(a)} |`,
    );
  }
  const markdown = `### Compaction beside the model call (bench/compaction.ts)

Deciding: the check before each model call of a run with compaction on (is the request past \`at\` x
\`maxContextTokens\`?) as the history grows one message at a time, reusing the run's counts (median and
worst of the last ${WINDOW} checks before each size), and the first check of a history that size, counted
from scratch as after a resume. Applying: one compaction of everything before the latest user message
(\`agent.compact\`: plan, transcript, the summary put in place, tokens before and after) with a model
that answers at once, so everything but the model call; median of 5.

| messages | deciding, median (last ${WINDOW}) | deciding, worst | deciding, cold (first check) | applying one compaction |
| ---: | ---: | ---: | ---: | ---: |
${rows.join("\n")}`;
  return { markdown, targets: [] };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  process.stdout.write(`${(await compactionCost()).markdown}\n`);
}
