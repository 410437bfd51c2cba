import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { afterEach, expect, it } from "vitest";
import { type FakeOpenAIServer, startFakeOpenAIServer } from "../src/testing/fake-openai-server.js";
import { CHECKS, clientFor } from "./support/open-responses-checks.js";
import { startServe } from "./support/serve-process.js";

// Open Responses compliance of `agentloop serve` (SPEC sections 6 and 14): the suite's checks (see
// test/support/open-responses-checks.ts) against the built server, a fake upstream behind it, with
// the expected failures of test/open-responses-baseline.yml.
const ROOT = fileURLToPath(new URL("..", import.meta.url));
const BASELINE = [
  ...readFileSync(`${ROOT}test/open-responses-baseline.yml`, "utf8").matchAll(/^\s*- (\S+)/gm),
].map((m) => m[1] as string);
/** A checkout of github.com/openresponses/openresponses (its bin/compliance-test.ts runs on bun). */
const SUITE = process.env.OPENRESPONSES_SUITE;

let upstream: FakeOpenAIServer | undefined;
afterEach(async () => {
  await upstream?.close();
  upstream = undefined;
});

type Wire = { role: string; content?: unknown };

/** The upstream model: calls the client's `get_weather` when offered, the calculator when asked, else answers. */
async function startUpstream(): Promise<FakeOpenAIServer> {
  return startFakeOpenAIServer({
    respond: (request) => {
      const body = request.body as { messages: Wire[]; tools?: { function: { name: string } }[] };
      const last = body.messages.at(-1);
      const offered = (body.tools ?? []).map((t) => t.function.name);
      if (last?.role === "tool") return { text: "It is 18 degrees and clear." };
      if (offered.includes("get_weather"))
        return { toolCalls: [{ name: "get_weather", arguments: { location: "Lyon" } }] };
      if (JSON.stringify(last?.content).includes("calculator"))
        return { toolCalls: [{ name: "calculator", arguments: { expression: "6 * 7" } }] };
      return { text: "Ahoy, all is well." };
    },
  });
}

/** Which ids failed, with what, against the baseline: none unexpected, none listed that passed. */
function judge(results: { id: string; errors: string[] }[]) {
  const failed = results.filter((r) => r.errors.length > 0);
  const unexpected = failed
    .filter((r) => !BASELINE.includes(r.id))
    .map((r) => `${r.id}: ${r.errors.join("; ")}`);
  const passing = BASELINE.filter((id) => results.some((r) => r.id === id && r.errors.length === 0));
  const unknown = BASELINE.filter((id) => !results.some((r) => r.id === id));
  return { unexpected, passing, unknown };
}

it("passes the Open Responses compliance checks outside the baseline", { timeout: 60_000 }, async () => {
  upstream = await startUpstream();
  const serve = startServe({ OPENAI_BASE_URL: upstream.url, OPENAI_API_KEY: "sk-upstream" });
  const client = clientFor(`${await serve.url()}/v1`);
  const results = [];
  for (const check of CHECKS) results.push({ id: check.id, errors: await check.run(client, "gpt-4o-mini") });
  expect(results.length).toBe(12);
  expect(judge(results)).toEqual({ unexpected: [], passing: [], unknown: [] });
});

it.runIf(SUITE)(
  "passes the suite's own bin/compliance-test.ts (on bun) outside the baseline",
  { timeout: 120_000 },
  async () => {
    upstream = await startUpstream();
    const serve = startServe({ OPENAI_BASE_URL: upstream.url, OPENAI_API_KEY: "sk-upstream" });
    const base = `${await serve.url()}/v1`;
    const bun = fileURLToPath(new URL("../node_modules/.bin/bun", import.meta.url));
    const output = await new Promise<string>((resolve, reject) => {
      const child = spawn(
        bun,
        ["run", "bin/compliance-test.ts", "--base-url", base, "--api-key", "none", "--json"],
        {
          cwd: SUITE,
          stdio: ["ignore", "pipe", "inherit"],
        },
      );
      let out = "";
      child.stdout.setEncoding("utf8").on("data", (d: string) => {
        out += d;
      });
      child.on("error", reject);
      child.on("close", () => resolve(out));
    });
    const { results } = JSON.parse(output.slice(output.indexOf("{"))) as {
      results: { id: string; status: string; errors?: string[] }[];
    };
    const ran = results.filter((r) => r.status !== "skipped");
    const verdict = judge(
      ran.map((r) => ({ id: r.id, errors: r.status === "failed" ? (r.errors ?? ["failed"]) : [] })),
    );
    // Our own checks (not in the suite) are not expected among its results.
    expect({
      ...verdict,
      unknown: verdict.unknown.filter((id) => CHECKS.some((c) => c.id === id) === false),
    }).toEqual({
      unexpected: [],
      passing: [],
      unknown: [],
    });
  },
);
