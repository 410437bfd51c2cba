// http-perf: the model adapters' cost per request, end to end over HTTP, against hand-written
// loops on the same official clients. `node bench/http-perf.ts [--n 100] [--rounds 10]
// [--only chat,anthropic,responses] [--json]`. The fake upstream runs in a child process
// (bench/http-perf-upstream.ts), so its CPU is not counted in the "CPU" columns.
//
// Per protocol, interleaved in one process, each round running every variant once (rotated order):
// - floor: a hand-written loop on the official client (`create({ stream: true })`, reading the
//   chunks, assembling the tool calls, validating the arguments with zod, awaiting the tool),
//   the same request bytes as agentloop's;
// - adapter: the same loop driving `model.stream()` of agentloop's adapter (the adapter alone);
// - agent: `new Agent({ model }).run()` (the adapter plus the whole loop, with its defaults:
//   guards, timeouts, pruning; only `maxIterations` raised to N + 1);
// each with this worktree's dist/ ("new") and, when present, a copy of the dist/ before this
// part's changes in node_modules/.agentloop-before/ ("old").
// Reported: µs per iteration, wall and this process's CPU, median (min-max) over the rounds.
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { createInterface } from "node:readline";
import { parseArgs } from "node:util";
import { assistantWithCalls, readChatStream } from "./chat-stream.ts";
import { type HttpSamples, median } from "./section.ts";

type Json = Record<string, unknown>;
// biome-ignore lint/suspicious/noExplicitAny: a bench script drives three SDKs and two builds
type Any = any;

const { values } = parseArgs({
  options: {
    n: { type: "string", default: "100" },
    rounds: { type: "string", default: "10" },
    only: { type: "string", default: "chat,anthropic,responses" },
    /** Only the variants whose name matches (e.g. "adapter new", for a profile). */
    match: { type: "string", default: "" },
    /** One JSON line of the samples instead of the table (bench/run.ts reads it). */
    json: { type: "boolean", default: false },
  },
});
const N = Number(values.n);
const ROUNDS = Number(values.rounds);
const ONLY = new Set(values.only.split(","));

const root = new URL("../", import.meta.url);
const builds: Record<string, URL> = { new: new URL("dist/", root) };
const before = new URL("node_modules/.agentloop-before/", root);
if (existsSync(before)) builds.old = before;

// The clients agentloop itself uses (the project's own node_modules).
const { default: OpenAI } = await import(new URL("node_modules/openai/index.mjs", root).href);
const { default: Anthropic } = await import(new URL("node_modules/@anthropic-ai/sdk/index.mjs", root).href);
const { z } = await import(new URL("node_modules/zod/index.js", root).href);

const upstream = spawn(
  process.execPath,
  [new URL("http-perf-upstream.ts", import.meta.url).pathname, String(N)],
  {
    stdio: ["pipe", "pipe", "inherit"],
  },
);
const urls: { chat: string; anthropic: string; responses: string } = JSON.parse(
  await new Promise<string>((resolve) => createInterface({ input: upstream.stdout }).once("line", resolve)),
);

const KEY = "sk-bench";
const MODEL = "gpt-4o-mini";

async function load(dir: URL) {
  const imp = (path: string) => import(new URL(path, dir).href);
  return {
    Agent: (await imp("index.js")).Agent,
    defineTool: (await imp("index.js")).defineTool,
    openAIChatModel: (await imp("models/openai-chat.js")).openAIChatModel,
    openAIResponsesModel: (await imp("models/openai-responses.js")).openAIResponsesModel,
    anthropicModel: (await imp("models/anthropic.js")).anthropicModel,
  };
}
const libs = Object.fromEntries(
  await Promise.all(Object.entries(builds).map(async ([name, dir]) => [name, await load(dir)] as const)),
);

const addParameters = z.object({ a: z.number(), b: z.number() });
const add = async ({ a, b }: { a: number; b: number }) => String(a + b);
/** What a careful hand-written loop does with a call's arguments: parse, validate with zod, await the tool. */
async function runTool(json: string): Promise<string> {
  const checked = addParameters.safeParse(JSON.parse(json));
  return checked.success ? add(checked.data) : checked.error.message;
}
/** What agentloop sends for this agent (no system prompt, this tool), for the floors to send alike. */
const spec = {
  system: "",
  tool: {
    name: "add",
    description: "Adds two numbers.",
    parameters: {
      type: "object",
      properties: { a: { type: "number" }, b: { type: "number" } },
      required: ["a", "b"],
    } as Json,
  },
};

type Loop = () => Promise<unknown>;

function agentRunner(lib: Any, model: Any): Loop {
  return () =>
    new lib.Agent({
      model,
      tools: [
        lib.defineTool({
          name: "add",
          description: spec.tool.description,
          parameters: addParameters,
          execute: add,
        }),
      ],
      maxIterations: N + 1,
    }).run("go");
}

/** The adapter alone: a minimal loop on `model.stream()`. */
function adapterRunner(model: Any): Loop {
  return async () => {
    const messages: Any[] = [{ role: "user", content: "go" }];
    for (;;) {
      let reply: Any;
      for await (const event of model.stream({ system: spec.system, messages, tools: [spec.tool] }, {})) {
        if (event.type === "done") reply = event.message;
        else if (event.type === "error") throw new Error(event.error.message);
      }
      if (reply.toolCalls.length === 0) return reply.content;
      messages.push({ role: "assistant", content: reply.content, toolCalls: reply.toolCalls });
      for (const call of reply.toolCalls) {
        const content = await runTool(call.arguments);
        messages.push({ role: "tool", toolCallId: call.id, name: call.name, content, isError: false });
      }
    }
  };
}

function chatFloor(client: Any): Loop {
  const tools = [{ type: "function", function: spec.tool }];
  return async () => {
    const messages: Any[] = spec.system ? [{ role: "system", content: spec.system }] : [];
    messages.push({ role: "user", content: "go" });
    for (;;) {
      const stream = await client.chat.completions.create({
        model: MODEL,
        messages,
        tools,
        stream_options: { include_usage: true },
        stream: true,
      });
      const { content, calls } = await readChatStream(stream);
      if (calls.length === 0) return content;
      messages.push(assistantWithCalls(content, calls));
      for (const c of calls)
        messages.push({ role: "tool", tool_call_id: c.id, content: await runTool(c.arguments) });
    }
  };
}

function anthropicFloor(client: Any): Loop {
  const tools = [
    {
      name: "add",
      description: spec.tool.description,
      input_schema: { type: "object", ...spec.tool.parameters },
    },
  ];
  return async () => {
    const messages: Any[] = [{ role: "user", content: [{ type: "text", text: "go" }] }];
    for (;;) {
      const stream = await client.messages.create({
        model: MODEL,
        max_tokens: 4096,
        messages,
        tools,
        stream: true,
      });
      let text = "";
      const blocks: Any[] = [];
      for await (const event of stream) {
        if (event.type === "content_block_start") blocks[event.index] = { ...event.content_block, json: "" };
        else if (event.type === "content_block_delta") {
          if (event.delta.type === "text_delta") text += event.delta.text;
          else if (event.delta.type === "input_json_delta")
            blocks[event.index].json += event.delta.partial_json;
        }
      }
      const uses = blocks.filter((b) => b.type === "tool_use");
      if (uses.length === 0) return text;
      const content: Any[] = text ? [{ type: "text", text }] : [];
      for (const u of uses)
        content.push({ type: "tool_use", id: u.id, name: u.name, input: JSON.parse(u.json || "{}") });
      messages.push({ role: "assistant", content });
      const results: Any[] = [];
      for (const u of uses)
        results.push({ type: "tool_result", tool_use_id: u.id, content: await runTool(u.json) });
      messages.push({ role: "user", content: results });
    }
  };
}

function responsesFloor(client: Any): Loop {
  const tools = [{ type: "function", ...spec.tool, strict: false }];
  return async () => {
    const input: Any[] = [{ role: "user", content: "go" }];
    for (;;) {
      const stream = await client.responses.create({
        model: MODEL,
        input,
        tools,
        store: false,
        stream: true,
      });
      let text = "";
      const calls: Any[] = [];
      for await (const event of stream) {
        if (event.type === "response.output_text.delta") text += event.delta;
        else if (event.type === "response.output_item.done" && event.item.type === "function_call")
          calls.push(event.item);
      }
      if (calls.length === 0) return text;
      if (text) input.push({ role: "assistant", content: text });
      for (const c of calls)
        input.push({ type: "function_call", call_id: c.call_id, name: c.name, arguments: c.arguments });
      for (const c of calls)
        input.push({ type: "function_call_output", call_id: c.call_id, output: await runTool(c.arguments) });
    }
  };
}

const variants: Record<string, Loop> = {};
if (ONLY.has("chat")) {
  variants["chat floor"] = chatFloor(new OpenAI({ baseURL: urls.chat, apiKey: KEY, maxRetries: 3 }));
  for (const [b, lib] of Object.entries(libs)) {
    const model = () => lib.openAIChatModel({ model: MODEL, baseURL: urls.chat, apiKey: KEY });
    variants[`chat adapter ${b}`] = adapterRunner(model());
    variants[`chat agent ${b}`] = agentRunner(lib, model());
  }
}
if (ONLY.has("anthropic")) {
  variants["anthropic floor"] = anthropicFloor(
    new Anthropic({
      baseURL: urls.anthropic,
      apiKey: KEY,
      maxRetries: 3,
      defaultHeaders: { "x-api-key": KEY, authorization: null },
    }),
  );
  for (const [b, lib] of Object.entries(libs)) {
    variants[`anthropic adapter ${b}`] = adapterRunner(
      lib.anthropicModel({ model: MODEL, baseURL: urls.anthropic, apiKey: KEY }),
    );
  }
}
if (ONLY.has("responses")) {
  variants["responses floor"] = responsesFloor(
    new OpenAI({ baseURL: urls.responses, apiKey: KEY, maxRetries: 3 }),
  );
  for (const [b, lib] of Object.entries(libs)) {
    variants[`responses adapter ${b}`] = adapterRunner(
      lib.openAIResponsesModel({ model: MODEL, baseURL: urls.responses, apiKey: KEY }),
    );
  }
}

const names = Object.keys(variants).filter((name) => new RegExp(values.match).test(name));
const floorOf = (name: string) => `${name.split(" ")[0]} floor`;
for (const name of names) await variants[name]?.(); // warm-up

/** One run: µs per iteration, wall and this thread's CPU (not the GC's helper threads). */
async function measure(name: string): Promise<{ wall: number; cpu: number }> {
  const c0 = process.threadCpuUsage();
  const t0 = performance.now();
  await variants[name]?.();
  const wall = ((performance.now() - t0) * 1000) / N;
  const c1 = process.threadCpuUsage(c0);
  return { wall, cpu: (c1.user + c1.system) / N };
}

// Each variant runs right beside a run of its protocol's floor (alternately before and after it),
// so that both see the same load on a shared machine; ratios are taken per pair.
type Samples = HttpSamples;
const samples: Record<string, Samples> = {};
const others = names.filter((name) => !name.endsWith(" floor"));
for (let round = 0; round < ROUNDS; round++) {
  for (let i = 0; i < others.length; i++) {
    const name = others[(i + round) % others.length] as string;
    const floor = floorOf(name);
    const first = round % 2 === 0 ? name : floor;
    const a = await measure(first);
    const b = await measure(first === name ? floor : name);
    const [v, f] = first === name ? [a, b] : [b, a];
    for (const [key, x] of [
      [name, v],
      [floor, f],
    ] as const) {
      samples[key] ??= { wall: [], cpu: [], wallRatio: [], cpuRatio: [], wallAdded: [], cpuAdded: [] };
      samples[key].wall.push(x.wall);
      samples[key].cpu.push(x.cpu);
    }
    const s = samples[name] as Samples;
    s.wallRatio.push(v.wall / f.wall);
    s.cpuRatio.push(v.cpu / f.cpu);
    s.wallAdded.push(v.wall - f.wall);
    s.cpuAdded.push(v.cpu - f.cpu);
  }
  process.stderr.write(`round ${round + 1}/${ROUNDS}\n`);
}
upstream.stdin.end();

if (values.json) {
  console.log(JSON.stringify({ n: N, rounds: ROUNDS, samples }));
  process.exit(0);
}
const fmt = (xs: number[], digits = 0, unit = "") =>
  xs.length === 0
    ? ""
    : `${median(xs).toFixed(digits)}${unit} (${Math.min(...xs).toFixed(digits)} to ${Math.max(...xs).toFixed(digits)})`;
console.log(
  `N = ${N}, ${ROUNDS} rounds; µs per iteration (= per request), median (min to max); ratio and added µs against the floor run beside it\n`,
);
console.log("| variant | CPU | CPU ratio | CPU added | wall | wall ratio | wall added |");
console.log("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
for (const name of names) {
  const s = samples[name];
  if (!s) continue;
  console.log(
    `| ${name} | ${fmt(s.cpu)} | ${fmt(s.cpuRatio, 3, "x")} | ${fmt(s.cpuAdded)} | ${fmt(s.wall)} | ${fmt(s.wallRatio, 3, "x")} | ${fmt(s.wallAdded)} |`,
  );
}
