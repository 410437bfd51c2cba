// Pruning cost per model call as the history grows to 10,000 messages (SPEC section 7: amortised
// O(1) per appended message, no recount of the history per iteration).
//
//   npm run build && node bench/pruning.ts
//
// A history of mixed turns (replies, user messages, tool calls with 1-3 parallel results) grows one
// message at a time; `fit` runs after every append under a budget that keeps it pruning. The table
// shows the median and worst time of the last 50 calls before each size (the median, since one
// preemption or GC pause on a shared machine would dominate a mean), for the estimate counter
// and the real o200k tokenizer, and for contrast what recounting the whole history would cost.
import type { Message } from "../dist/core/messages.js";
import { contextManager } from "../dist/memory/prune.js";
import { tokenCounterFor } from "../dist/memory/tokens.js";

const SIZES = [100, 1_000, 5_000, 10_000];
const WINDOW = 50;
const MAX_CONTEXT_TOKENS = 4_000;
const system = "You are a careful assistant. Use the tools when they help. ".repeat(8);
const tools = [
  { name: "calculator", description: "Evaluates arithmetic.", parameters: { type: "object" } },
  { name: "read_file", description: "Reads a file.", parameters: { type: "object" } },
];

// A deterministic mix of turns, so every run measures the same history.
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
        isError: random() < 0.1,
      }),
    ),
  ];
}

interface Row {
  median: number;
  max: number;
}

async function measure(modelId: string): Promise<Map<number, Row>> {
  seed = 42;
  const manager = contextManager({ modelId, maxContextTokens: MAX_CONTEXT_TOKENS });
  const history: Message[] = [
    { role: "user", content: "Audit the repository and report every failing test." },
  ];
  const pending: Message[] = [];
  const rows = new Map<number, Row>();
  let window: number[] = [];
  while (history.length < 10_000) {
    if (pending.length === 0) pending.push(...turn(history.length));
    history.push(pending.shift() as Message);
    const started = performance.now();
    const sent = await manager.fit(history, system, tools);
    const elapsed = performance.now() - started;
    const size = SIZES.find((s) => history.length > s - WINDOW && history.length <= s);
    if (size === undefined) continue;
    if (sent === history) throw new Error("the budget should force pruning in every measured call");
    window.push(elapsed * 1_000);
    if (history.length === size) {
      window.sort((a, b) => a - b);
      rows.set(size, { median: window[window.length >> 1] ?? 0, max: window.at(-1) ?? 0 });
      window = [];
    }
  }
  return rows;
}

/** What one full recount of the history costs at each size (what the cached prefix sums avoid). */
function recount(modelId: string): Map<number, { micros: number; tokens: number }> {
  seed = 42;
  const counter = tokenCounterFor(modelId);
  const history: Message[] = [
    { role: "user", content: "Audit the repository and report every failing test." },
  ];
  while (history.length < 10_000) history.push(...turn(history.length));
  const rows = new Map<number, { micros: number; tokens: number }>();
  for (const size of SIZES) {
    const started = performance.now();
    let tokens = 0;
    for (let i = 0; i < size; i++) tokens += counter.countMessage(history[i] as Message);
    rows.set(size, { micros: (performance.now() - started) * 1_000, tokens });
  }
  return rows;
}

const models = [
  ["estimate", "llama3.1"],
  ["o200k", "gpt-4o"],
] as const;
await measure("llama3.1"); // warm-up: JIT, and the tokenizer's first load
await measure("gpt-4o");
const results = [];
for (const [label, id] of models) results.push({ label, rows: await measure(id), recount: recount(id) });

const pad = (value: string, width: number) => value.padStart(width);
console.log(
  `fit() after every append, maxContextTokens ${MAX_CONTEXT_TOKENS}, median (max) of the last ${WINDOW} calls`,
);
const header = results.map((r) => `${pad(`${r.label} µs/fit`, 20)} | ${pad("1 recount µs", 12)}`);
console.log(`${pad("messages", 9)} | ${pad("tokens", 9)} | ${header.join(" | ")}`);
for (const size of SIZES) {
  const cells = results.map(({ rows, recount: full }) => {
    const row = rows.get(size) as Row;
    return `${pad(`${row.median.toFixed(1)} (${row.max.toFixed(0)})`, 20)} | ${pad((full.get(size)?.micros ?? 0).toFixed(0), 12)}`;
  });
  const tokens = results[1]?.recount.get(size)?.tokens ?? 0;
  console.log(
    `${pad(size.toLocaleString("en-US"), 9)} | ${pad(tokens.toLocaleString("en-US"), 9)} | ${cells.join(" | ")}`,
  );
}
for (const { label, rows } of results) {
  const ratio = (rows.get(10_000) as Row).median / (rows.get(100) as Row).median;
  console.log(`${label}: median at 10,000 / median at 100 = ${ratio.toFixed(2)}`);
}
