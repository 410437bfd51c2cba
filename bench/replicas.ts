// Replica scaling: completed chat completions per second from one, two and four `agentloop serve`
// processes sharing one PostgreSQL database, every run stored; with PostgreSQL's defaults and with
// `synchronous_commit = off` on the database, and one replica without a store for reference.
//
//   npm run build && node bench/replicas.ts [seconds] [rounds]
//
// Separate processes: a throwaway PostgreSQL cluster with default settings (bench/postgres.ts), the
// fake OpenAI server as the upstream model answering after 50 ms (bench/upstream.ts), four replicas (`agentloop serve
// --port 0` with AGENTLOOP_DB=postgres://...) per database, and the load generator (bench/load.ts: autocannon,
// CONNECTIONS keep-alive connections round-robin over the replicas under test, since there is no
// load balancer). One run: a non-streaming chat completion whose model calls `calculator` once and
// then answers, i.e. two upstream calls, one tool call and the run's checkpoints in PostgreSQL.
// All replicas run throughout; a measurement sends load to the first 1, 2 or 4 of a database's
// (an idle replica uses no CPU), in rounds that take every setup in turn, so a burst of other work
// on a shared machine hits them alike; the median round of each is reported, with the range.
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, openSync, readFileSync, rmSync } from "node:fs";
import os, { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { cpuSeconds, machineBusySeconds } from "./cpu.ts";
import { type BenchPostgres, postgresMissing, startBenchPostgres } from "./postgres.ts";
import { type Load, load, startUpstream } from "./processes.ts";

const CONNECTIONS = 64;
/** The upstream model's time per answer: a run waits for two of them. */
const LATENCY_MS = 50;
const COUNTS = [1, 2, 4];
/** The databases the replicas share: PostgreSQL's defaults, and without waiting for WAL flushes. */
const DATABASES: [string, Record<string, string>][] = [
  ["defaults", {}],
  ["synchronous_commit=off", { synchronous_commit: "off" }],
];
const BIN = fileURLToPath(new URL("../dist/cli/bin.js", import.meta.url));

interface Replica {
  child: ChildProcess;
  url: string;
  exited: Promise<unknown>;
}

async function startReplica(dir: string, index: number, env: Record<string, string>): Promise<Replica> {
  const log = join(dir, `replica-${index}.log`);
  const child = spawn(process.execPath, [BIN, "serve", "--port", "0"], {
    cwd: dir,
    env: { PATH: process.env.PATH ?? "", ...env },
    stdio: ["ignore", "ignore", openSync(log, "w")],
  });
  const exited = new Promise((resolve) => child.once("exit", resolve));
  for (let waited = 0; waited < 30_000; waited += 50) {
    const match = /serving \S+ on (http:\/\/\S+) /.exec(readFileSync(log, "utf8"));
    if (match) return { child, url: match[1] as string, exited };
    if (child.exitCode !== null) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  child.kill("SIGKILL");
  throw new Error(`agentloop serve did not start: ${readFileSync(log, "utf8").trim()}`);
}

interface Measurement extends Load {
  /** CPU seconds during the measurement. */
  cpu: { replicas: number; postgres: number; upstream: number; machine: number };
}

interface Processes {
  replicas: Replica[];
  postgres: BenchPostgres;
  upstream: ChildProcess;
}

/** Load on `targets` for `seconds`, with the CPU every process used meanwhile. */
async function measure(targets: Replica[], seconds: number, all: Processes): Promise<Measurement> {
  const cpu = () => ({
    replicas: all.replicas.reduce((sum, r) => sum + cpuSeconds(r.child.pid ?? 0), 0),
    postgres: all.postgres.cpu(),
    upstream: cpuSeconds(all.upstream.pid ?? 0),
    machine: machineBusySeconds(),
  });
  let before = cpu();
  const result = await load(
    seconds,
    CONNECTIONS,
    targets.map((r) => r.url),
    {
      onStart: () => {
        before = cpu();
      },
    },
  );
  const after = cpu();
  return {
    ...result,
    cpu: {
      replicas: after.replicas - before.replicas,
      postgres: after.postgres - before.postgres,
      upstream: after.upstream - before.upstream,
      machine: after.machine - before.machine,
    },
  };
}

interface Setup {
  store: string;
  count: number;
  targets: Replica[];
  rounds: Measurement[];
}

const rate = (m: Measurement) => m.ok / m.seconds;

/** The setup's median round. */
const median = (setup: Setup) =>
  [...setup.rounds].sort((a, b) => rate(a) - rate(b))[Math.floor(setup.rounds.length / 2)] as Measurement;

function row(setup: Setup): string {
  const m = median(setup);
  const rates = setup.rounds.map(rate);
  const range =
    rates.length > 1 ? ` (${Math.min(...rates).toFixed(0)}-${Math.max(...rates).toFixed(0)})` : "";
  const perRun = (s: number) => (m.ok === 0 ? "-" : ((s * 1000) / m.ok).toFixed(1));
  const ours = (m.cpu.replicas + m.cpu.postgres + m.cpu.upstream + m.cpuSeconds) / m.seconds;
  const stored = setup.store !== "no store";
  return `| ${setup.store} | ${setup.count} | ${rate(m).toFixed(0)}${range} | ${m.ok === 0 ? "-" : m.p50} | ${m.ok === 0 ? "-" : m.p99} | ${perRun(m.cpu.replicas)} | ${stored ? perRun(m.cpu.postgres) : "-"} | ${perRun(m.cpu.upstream)} | ${perRun(m.cpuSeconds)} | ${perRun(m.cpu.replicas + m.cpu.postgres + m.cpu.upstream + m.cpuSeconds)} | ${ours.toFixed(2)} of ${(m.cpu.machine / m.seconds).toFixed(2)} |`;
}

/** What the table means, from its numbers. */
function explain(setups: Setup[], cores: number, commitsPerRun: number): string {
  const at = (store: string, count: number) => {
    const setup = setups.find((s) => s.store === store && s.count === count);
    return setup && median(setup);
  };
  const [fast] = DATABASES[1] ?? ["synchronous_commit=off"];
  const times = (store: string, count: number) => {
    const [m, one] = [at(store, count), at(store, 1)];
    return m && one ? `${(rate(m) / rate(one)).toFixed(2)}x` : "-";
  };
  const bare = at("no store", 1);
  const m = at("defaults", 1);
  if (!m || !bare || m.ok === 0) return "";
  const ms = (seconds: number) => (seconds * 1000) / m.ok;
  const replica = ms(m.cpu.replicas);
  const server = ms(m.cpu.postgres);
  const total = replica + server + ms(m.cpu.upstream) + ms(m.cpuSeconds);
  const perReplicaRun = (count: number) => {
    const x = at(fast, count);
    return x ? x.cpu.replicas / Math.max(1, x.ok) : Number.NaN;
  };
  const grows = perReplicaRun(4) > perReplicaRun(2) && perReplicaRun(2) > perReplicaRun(1);
  const fastOne = at(fast, 1);
  const oneReplica = 1000 / replica;
  const machine = (cores * 1000) / total;
  return `Two replicas served ${times("defaults", 2)} the runs per second of one and four ${times("defaults", 4)} with PostgreSQL's defaults
(${times(fast, 2)} and ${times(fast, 4)} with ${fast}); one replica storing every run served
${(rate(m) / rate(bare)).toFixed(2)}x the runs per second of one without a store.

The machine is shared, so what these processes got of its ${cores} cores changed from one measurement to the
next (the last column: other work took the rest), and the ratios above move with it; what a run costs
is steadier. With one replica on the defaults a stored run cost ${total.toFixed(0)} ms of CPU:
${replica.toFixed(1)} in the replica, ${server.toFixed(1)} in PostgreSQL for its ${commitsPerRun.toFixed(0)} transactions, the rest in the upstream and the
load generator. That sets the ceilings here: a replica is one Node.js thread, so one replica serves at
most about ${oneReplica.toFixed(0)} runs a second; every process shares the ${cores} cores, so any number of replicas serve at
most about ${machine.toFixed(0)}. ${
    oneReplica < machine
      ? `A second replica can add the difference, no more`
      : `One replica already reaches the machine's ceiling, so a second adds nothing`
  }; more replicas than cores add only context switches, colder caches and connections${
    grows ? " (the CPU a run costs its replicas grows\nwith their number here)" : ""
  }.${
    setups.some((x) => x.store !== "no store" && rate(median(x)) > machine)
      ? " A measured rate above that ceiling comes from runs that cost less CPU in its measurement."
      : ""
  } ${fast}
spares each COMMIT its wait for the WAL flush (see "Session checkpoints"): with one replica it served
${fastOne ? (rate(fastOne) / rate(m)).toFixed(2) : "-"}x the runs per second of the defaults. Where replicas have cores of their own (several
machines, PostgreSQL on its own), the same costs say what to expect: a replica's core serves about
${oneReplica.toFixed(0)} stored runs a second and a PostgreSQL core about ${(1000 / server).toFixed(0)}, whatever the number of replicas; both
figures are inflated by the competition on this shared machine.`;
}

/** Lets the runs still in flight after a measurement end. */
const settle = () => new Promise((r) => setTimeout(r, 3_000));

interface Stats {
  /** Runs stored as completed with `final_answer`, and with `aborted`. */
  finished: number;
  aborted: number;
  /** Transactions committed in the databases (pg_stat_database; flushed within a second). */
  commits: number;
}

/** The databases' runs and commits so far. */
async function stats(urls: string[]): Promise<Stats> {
  const total: Stats = { finished: 0, aborted: 0, commits: 0 };
  for (const url of urls) {
    const db = new pg.Client({ connectionString: url });
    await db.connect();
    try {
      const { rows } = await db.query<{ finished: string; aborted: string; commits: string }>(
        `SELECT (SELECT count(*) FROM agentloop_runs WHERE status = 'completed' AND stop_reason = 'final_answer') AS finished,
           (SELECT count(*) FROM agentloop_runs WHERE status = 'completed' AND stop_reason = 'aborted') AS aborted,
           (SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()) AS commits`,
      );
      total.finished += Number(rows[0]?.finished);
      total.aborted += Number(rows[0]?.aborted);
      total.commits += Number(rows[0]?.commits);
    } finally {
      await db.end();
    }
  }
  return total;
}

/** The replica scaling section: `seconds` per measurement, `rounds` rounds. */
export async function replicaScaling(seconds: number, rounds: number): Promise<string> {
  const title = "### Replicas on one PostgreSQL (bench/replicas.ts)";
  if (postgresMissing) return `${title}\n\nSkipped: ${postgresMissing}.`;
  const dir = mkdtempSync(join(tmpdir(), "agentloop-bench-replicas-"));
  const postgres = await startBenchPostgres();
  let upstream: ChildProcess | undefined;
  const replicas: Replica[] = [];
  try {
    const started = await startUpstream(LATENCY_MS);
    upstream = started.child;
    const env = { OPENAI_BASE_URL: started.url, OPENAI_API_KEY: "sk-bench" };
    replicas.push(await startReplica(dir, 0, env));
    const setups: Setup[] = [{ store: "no store", count: 1, targets: replicas.slice(), rounds: [] }];
    const urls: string[] = [];
    for (const [store, settings] of DATABASES) {
      const url = await postgres.database(settings);
      urls.push(url);
      const own: Replica[] = [];
      // One at a time: they create the schema on start (safe at once, but not what is measured here).
      for (let i = 0; i < Math.max(...COUNTS); i++)
        own.push(await startReplica(dir, replicas.length + i, { ...env, AGENTLOOP_DB: url }));
      replicas.push(...own);
      for (const count of COUNTS) setups.push({ store, count, targets: own.slice(0, count), rounds: [] });
    }
    const all: Processes = { replicas, postgres, upstream };
    process.stderr.write("replicas: warm-up\n");
    await load(
      Math.max(1, Math.floor(seconds / 2)),
      CONNECTIONS,
      replicas.map((r) => r.url),
    );
    await settle();
    const before = await stats(urls);
    const loadAverage = os.loadavg()[0] ?? 0;
    for (let r = 0; r < rounds; r++) {
      for (const setup of setups) {
        process.stderr.write(`replicas: ${setup.store}, ${setup.count}, round ${r + 1}\n`);
        setup.rounds.push(await measure(setup.targets, seconds, all));
      }
    }
    const measured = setups.flatMap((s) => s.rounds);
    const failed = measured.reduce((sum, m) => sum + m.non2xx + m.errors + m.timeouts, 0);
    const answered = setups
      .filter((s) => s.store !== "no store")
      .flatMap((s) => s.rounds)
      .reduce((sum, m) => sum + m.ok, 0);
    await settle();
    const after = await stats(urls);
    const finished = after.finished - before.finished;
    const aborted = after.aborted - before.aborted;
    const commitsPerRun = (after.commits - before.commits) / Math.max(1, finished + aborted);
    return `${title}

Every process on ${os.cpus().length} cores, shared with other work (load average ${loadAverage.toFixed(1)} when the
measurements started). ${CONNECTIONS} keep-alive connections, ${seconds} s per measurement, median of ${rounds} round${rounds === 1 ? "" : "s"} (range in brackets).
One request = one run: a non-streaming chat completion with two upstream calls (the fake upstream, in its
own process, answers each after ${LATENCY_MS} ms) and one \`calculator\`
call, stored on PostgreSQL except in the "no store" row. ${failed} requests failed; the
${answered.toLocaleString("en")} answered on PostgreSQL left ${finished.toLocaleString("en")} runs stored with \`final_answer\`${finished >= answered ? " (none lost; the few more are runs that ended\njust as a measurement ended, after the load generator stopped counting)" : " (FEWER than answered: runs were lost)"} and ${aborted} with \`aborted\` (cut as the
load generator closed its connections at the end of each measurement).

| PostgreSQL | replicas | runs/s | p50 ms | p99 ms | CPU ms per run: replicas | PostgreSQL | upstream | load generator | all | cores busy: these processes of the whole machine |
| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |
${setups.map(row).join("\n")}

${explain(setups, os.cpus().length, commitsPerRun)}`;
  } finally {
    for (const replica of replicas) replica.child.kill("SIGTERM");
    await Promise.all(replicas.map((r) => r.exited));
    upstream?.kill("SIGTERM");
    await postgres.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url))
  console.log(await replicaScaling(Number(process.argv[2] ?? 8), Number(process.argv[3] ?? 3)));
