// The load generator of bench/replicas.ts and bench/server.ts, in its own process: autocannon,
// keep-alive connections spread round-robin over the given servers (connection i goes to server
// i mod n), chat completions (streaming with --stream). Prints "started" as the load starts,
// then one JSON line: the result and its own CPU.
//
//   node bench/load.ts <seconds> <connections> [--stream] <url>...
import autocannon from "autocannon";

const args = process.argv.slice(2);
const stream = args.includes("--stream");
const [seconds, connections, ...urls] = args.filter((a) => a !== "--stream");
const cpu = process.cpuUsage();
process.stdout.write("started\n");
const result = await autocannon({
  url: urls.map((url) => `${url}/v1/chat/completions`),
  method: "POST",
  headers: { "content-type": "application/json" },
  body: JSON.stringify({ messages: [{ role: "user", content: "What is 1 + 2?" }], stream }),
  connections: Number(connections),
  duration: Number(seconds),
  timeout: 30,
});
const used = process.cpuUsage(cpu);
process.stdout.write(
  `${JSON.stringify({
    ok: result["2xx"],
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    seconds: result.duration,
    p50: result.latency.p50,
    p99: result.latency.p99,
    cpuSeconds: (used.user + used.system) / 1e6,
  })}\n`,
);
