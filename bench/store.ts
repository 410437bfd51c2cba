// Session store costs: checkpoint latency (what a run pays per stored message, SPEC section 9:
// the assistant message before its tool calls start, each tool result as its call completes), then
// whole stored runs per second (bench/stored-runs.ts), on each store and without one.
//
//   npm run build && node bench/store.ts [checkpoints] [runs]
//
// One checkpoint = append one tool-result message of about 1 KB + upsert the run record with a
// state of about 2 KB, awaited through the public `SessionHandle.checkpoint`: into a SQLite file
// in WAL mode on the local disk (`full`, an fsync per commit, runs a tenth as many), or into a
// throwaway local PostgreSQL cluster with its default settings (bench/postgres.ts), also with
// `synchronous_commit = off` set on the database.
import { mkdtempSync, rmSync } from "node:fs";
import os, { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Message } from "../dist/core/messages.js";
import { memoryStore, postgresStore, type SessionStore, sqliteStore } from "../dist/store/index.js";
import { type BenchPostgres, postgresMissing, startBenchPostgres } from "./postgres.ts";
import { storedRuns, type Variant } from "./stored-runs.ts";

/** The checkpoint every store is measured with: a tool result and a run state (bench/missed.ts profiles it too). */
export const result: Message = {
  role: "tool",
  toolCallId: "call_0",
  name: "read_file",
  content: "line of a file that a tool read, as a model would see it\n".repeat(18),
  isError: false,
};
export const state = {
  version: 1,
  iteration: 0,
  usage: { inputTokens: 12_345, outputTokens: 678 },
  steps: Array.from({ length: 12 }, (_, i) => ({
    iteration: i,
    ms: 812,
    inputTokens: 1000 + i,
    outputTokens: 50,
  })),
  pending: [
    {
      id: "call_1",
      name: "write_file",
      arguments: JSON.stringify({ path: "src/a.ts", text: "x".repeat(1100) }),
    },
  ],
};

interface Latency {
  median: number;
  p99: number;
  mean: number;
}

async function measure(store: SessionStore, checkpoints: number): Promise<Latency> {
  const handle = await store.acquire("bench");
  const times: number[] = [];
  const warmup = Math.min(200, checkpoints / 10);
  for (let i = -warmup; i < checkpoints; i++) {
    state.iteration = i;
    const started = performance.now();
    await handle.checkpoint({ messages: [result], run: { runId: "run-bench", status: "running", state } });
    if (i >= 0) times.push((performance.now() - started) * 1000);
  }
  await handle.release();
  times.sort((a, b) => a - b);
  const at = (q: number) => times[Math.min(times.length - 1, Math.floor(q * times.length))] ?? Number.NaN;
  return { median: at(0.5), p99: at(0.99), mean: times.reduce((a, b) => a + b, 0) / times.length };
}

/** The checkpoint latency and stored runs sections, PostgreSQL included when its server is installed. */
export interface StoreResults {
  sections: string[];
  /** Median checkpoint latency (µs) by store. */
  checkpointMedians: Record<string, number>;
  /** CPU µs per iteration of a stored run (this process, and the store's server), by store. */
  cpuPerIteration: Record<string, { own: number; server?: number }>;
}

export async function storeBenchmarks(
  checkpoints: number,
  runs: number,
  roundMs: number,
): Promise<StoreResults> {
  const dir = mkdtempSync(join(tmpdir(), "agentloop-bench-store-"));
  let pg: BenchPostgres | undefined;
  const opened: SessionStore[] = [];
  /** Every store opened is closed at the end. */
  const open = async (opening: SessionStore | Promise<SessionStore>) => {
    const store = await opening;
    opened.push(store);
    return store;
  };
  try {
    pg = postgresMissing === undefined ? await startBenchPostgres() : undefined;
    const loadAverage = os.loadavg()[0] ?? 0;
    const rows: [string, number, Latency][] = [];
    rows.push(["in-memory", checkpoints, await measure(await open(memoryStore()), checkpoints)]);
    for (const synchronous of ["normal", "full"] as const) {
      const n = synchronous === "full" ? Math.max(10, Math.floor(checkpoints / 10)) : checkpoints;
      const store = await open(sqliteStore(join(dir, `${synchronous}.db`), { synchronous }));
      rows.push([`SQLite, WAL, synchronous=${synchronous.toUpperCase()}`, n, await measure(store, n)]);
    }
    const pgSync = pg && (await open(postgresStore(await pg.database())));
    const pgAsync = pg && (await open(postgresStore(await pg.database({ synchronous_commit: "off" }))));
    if (pgSync && pgAsync) {
      rows.push([
        `PostgreSQL ${pg?.version}, defaults (synchronous_commit=on)`,
        checkpoints,
        await measure(pgSync, checkpoints),
      ]);
      rows.push(["PostgreSQL, synchronous_commit=off", checkpoints, await measure(pgAsync, checkpoints)]);
    }

    const variants: Variant[] = [
      { name: "no store" },
      { name: "in-memory", store: await open(memoryStore()) },
      { name: "SQLite, WAL, NORMAL", store: await open(sqliteStore(join(dir, "runs.db"))) },
    ];
    if (pg) {
      const serverCpu = pg.cpu;
      const onPostgres = async (settings?: Record<string, string>) =>
        open(postgresStore(await (pg as BenchPostgres).database(settings)));
      variants.push(
        { name: "PostgreSQL, defaults", store: await onPostgres(), serverCpu },
        {
          name: "PostgreSQL, synchronous_commit=off",
          store: await onPostgres({ synchronous_commit: "off" }),
          serverCpu,
        },
      );
    }
    const stored = await storedRuns(variants, runs, roundMs);
    return {
      sections: [checkpointTable(rows, loadAverage), stored.markdown],
      checkpointMedians: Object.fromEntries(rows.map(([name, , latency]) => [name, latency.median])),
      cpuPerIteration: stored.cpuPerIteration,
    };
  } finally {
    for (const store of opened) await store.close().catch(() => undefined);
    await pg?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

function checkpointTable(rows: [string, number, Latency][], loadAverage: number): string {
  const [synced, unsynced] = rows
    .filter(([name]) => name.startsWith("PostgreSQL"))
    .map(([, , l]) => l.median);
  const split =
    synced === undefined || unsynced === undefined
      ? ""
      : synced <= unsynced
        ? ` Here the two medians differ by less than the noise: the disk's flush was cheap next to the five
round trips on a busy machine.`
        : ` Here the flush added about ${(synced - unsynced).toFixed(0)} µs to the median; the
five round trips and the server's work are the other ${unsynced.toFixed(0)} µs.`;
  const table = rows
    .map(
      ([name, n, l]) =>
        `| ${name} | ${n.toLocaleString("en")} | ${l.median.toFixed(1)} | ${l.p99.toFixed(1)} | ${l.mean.toFixed(1)} |`,
    )
    .join("\n");
  return `### Session checkpoints (bench/store.ts; one ${JSON.stringify(result).length}-byte tool result appended + a ${JSON.stringify(state).length}-byte run state upserted, one transaction, awaited; µs)

| store | checkpoints | median | p99 | mean |
| --- | ---: | ---: | ---: | ---: |
${table}
${postgresMissing ? `\nPostgreSQL skipped: ${postgresMissing}.\n` : ""}
NORMAL is SQLite's default here: a resolved checkpoint survives the process being killed (test/sqlite-store.test.ts
kills a writer with SIGKILL); FULL adds an fsync per commit so it also survives a power loss. Most of a
NORMAL checkpoint is SQLite's WAL commit itself (a transaction updating one small row costs about 25 µs here); JSON
encoding of the message and state is about 6 µs. The p99 and the mean include SQLite's automatic WAL
checkpoint (every 1,000 pages, about every 200 checkpoints), which copies pages back and fsyncs.

PostgreSQL runs on the same machine, reached over TCP on 127.0.0.1 through the \`pg\` driver, with
its defaults (fsync on, synchronous_commit on, shared_buffers 128 MB). A checkpoint is one transaction
of five statements (BEGIN, the session row's conditional update, the message insert, the run upsert,
COMMIT), each a round trip to the server; with synchronous_commit on, COMMIT waits for the WAL to be
flushed to disk, so the defaults compare with SQLite FULL (durable across a power loss), not NORMAL.
\`synchronous_commit = off\` (settable per database, role or transaction) returns before the flush: a
crash of the PostgreSQL server or the machine may lose the last fraction of a second of resolved
checkpoints (never half of one), a crash of agentloop loses nothing.${split} Measured on a machine shared with other
work (load average ${loadAverage.toFixed(1)} when this section started), which inflates every round trip.`;
}

if (process.argv[1] === fileURLToPath(import.meta.url))
  console.log(
    (
      await storeBenchmarks(Number(process.argv[2] ?? 2000), Number(process.argv[3] ?? 600), 1000)
    ).sections.join("\n\n"),
  );
