// Cold start, measured from outside in fresh processes, every case interleaved round by round so
// the machine's load hits them alike: `agentloop --help` against `node -e 0`, `import("agentloop-runtime")`,
// and how long after its spawn `agentloop run` sends its first request upstream (a local server
// records the arrival; the floor is a bare `node -e "fetch(...)"`).
//
// Also lists the modules `import("agentloop-runtime")` loads, and which of them are provider, MCP, server,
// store or CLI code (none should be).
//
//   npm run build && node bench/cold-start.ts [rounds=20] [--json]
import { execFileSync, spawn } from "node:child_process";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const BIN = fileURLToPath(new URL("../dist/cli/bin.js", import.meta.url));

// One streamed Chat Completions reply: enough for `agentloop run` to finish with a final answer.
const chunk = (delta: object, finish: string | null) =>
  `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", created: 1, model: "m", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
const REPLY = `${chunk({ role: "assistant", content: "ok" }, null)}${chunk({}, "stop")}data: [DONE]\n\n`;

let arrived: ((at: number) => void) | undefined;
const upstream = createServer((req, res) => {
  arrived?.(performance.now());
  arrived = undefined;
  req.resume();
  req.on("end", () => {
    res.writeHead(200, { "content-type": "text/event-stream" });
    res.end(REPLY);
  });
});
await new Promise<void>((resolve) => upstream.listen(0, "127.0.0.1", resolve));
const base = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/v1`;
const env = { ...process.env, OPENAI_BASE_URL: base, OPENAI_API_KEY: "sk-bench" };

/** Spawn to exit, in ms. */
function exitMs(args: string[]): Promise<number> {
  const started = performance.now();
  const child = spawn(process.execPath, args, { cwd: ROOT, env, stdio: "ignore" });
  return new Promise((resolve, reject) => {
    child.on("error", reject);
    child.on("exit", (code) =>
      code === 0
        ? resolve(performance.now() - started)
        : reject(new Error(`${args.join(" ")}: exit ${code}`)),
    );
  });
}

/** Spawn to the first request's arrival upstream, in ms (the process then runs to its end). */
async function firstRequestMs(args: string[]): Promise<number> {
  const arrival = new Promise<number>((resolve) => {
    arrived = resolve;
  });
  const started = performance.now();
  const child = spawn(process.execPath, args, { cwd: ROOT, env, stdio: "ignore" });
  const exit = new Promise((resolve) => child.on("exit", resolve));
  const at = await arrival;
  await exit;
  return at - started;
}

const cases: { name: string; measure: () => Promise<number>; floor?: string }[] = [
  { name: "node -e 0", measure: () => exitMs(["-e", "0"]) },
  { name: "agentloop --help", measure: () => exitMs([BIN, "--help"]), floor: "node -e 0" },
  { name: "agentloop --version", measure: () => exitMs([BIN, "--version"]), floor: "node -e 0" },
  {
    name: 'import("agentloop-runtime")',
    measure: () => exitMs(["--input-type=module", "-e", 'await import("agentloop-runtime")']),
    floor: "node -e 0",
  },
  {
    name: "first request: node fetch",
    measure: () =>
      firstRequestMs([
        "-e",
        `fetch(${JSON.stringify(`${base}/chat/completions`)}, { method: "POST", body: "{}" })`,
      ]),
  },
  {
    name: "first request: agentloop run",
    measure: () => firstRequestMs([BIN, "run", "hi"]),
    floor: "first request: node fetch",
  },
];

const rounds = Number(process.argv[2] ?? 20);
const times = new Map(cases.map((c) => [c.name, [] as number[]]));
for (let round = 0; round < rounds; round++) {
  for (const c of cases) times.get(c.name)?.push(await c.measure());
}
upstream.close();

/** The modules `import("agentloop-runtime")` loads (a module hook records them), relative to dist/ or node_modules/. */
const HOOK = `import { registerHooks } from "node:module";
const seen = [];
registerHooks({ load(url, context, next) { seen.push(url); return next(url, context); } });
await import("agentloop-runtime");
console.log(JSON.stringify(seen));`;
const loaded = (
  JSON.parse(
    execFileSync(process.execPath, ["--input-type=module", "-e", HOOK], { cwd: ROOT, encoding: "utf8" }),
  ) as string[]
)
  .filter((url) => url.startsWith("file:"))
  .map((url) => url.replace(/^file:\/\/.*?\/(dist|node_modules)\//, "$1/"));
const HEAVY =
  /^dist\/(models\/(openai|anthropic)|mcp\/|server\/|store\/|cli\/)|^node_modules\/(openai|@anthropic-ai|@modelcontextprotocol|hono|@hono|pg)\//;
const heavy = loaded.filter((path) => HEAVY.test(path));

const median = (xs: number[]) => xs.toSorted((a, b) => a - b)[xs.length >> 1] ?? Number.NaN;
if (process.argv.includes("--json")) {
  console.log(JSON.stringify({ rounds, times: Object.fromEntries(times), loaded, heavy }));
  process.exit(0);
}
console.log(`cold start, ${rounds} interleaved rounds: median [min-max] ms`);
for (const c of cases) {
  const xs = times.get(c.name) ?? [];
  const floor = c.floor === undefined ? undefined : median(times.get(c.floor) ?? []);
  const ratio = floor === undefined ? "" : `  ${(median(xs) / floor).toFixed(2)}x ${c.floor}`;
  console.log(
    `${c.name.padEnd(30)} ${median(xs).toFixed(1).padStart(6)} [${Math.min(...xs).toFixed(1)}-${Math.max(...xs).toFixed(1)}]${ratio}`,
  );
}
console.log(
  `import("agentloop-runtime") loads ${loaded.length} modules; provider, MCP, server, store or CLI code among them: ${heavy.length ? heavy.join(", ") : "none"}`,
);
