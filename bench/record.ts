// Recording's cost per streamed chunk (issue 26, SPEC section 12): one model call streaming a long
// answer from the fake OpenAI server (its deltas word by word), through the official client, with
// and without `record`; interleaved, CPU µs (user + system) of this process per chunk. Off, the
// adapter's client has no recording fetch at all (nothing per chunk). `node bench/record.ts`
// prints the section alone.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Agent } from "../dist/index.js";
import { openAIChatModel } from "../dist/models/openai-chat.js";
import { startFakeOpenAIServer } from "../dist/testing/index.js";
import { medianRange, type Section } from "./section.ts";

const WORDS = 2_000;

export async function recordingCost(rounds = 11): Promise<Section> {
  const text = Array.from({ length: WORDS }, (_, i) => `word${i}`).join(" ");
  const server = await startFakeOpenAIServer({ respond: () => ({ text }) });
  const dir = mkdtempSync(join(tmpdir(), "agentloop-bench-record-"));
  try {
    const model = openAIChatModel({ model: "gpt-4o-mini", baseURL: server.url, apiKey: "sk-bench" });
    const plain = new Agent({ model });
    const recorded = new Agent({ model, record: join(dir, "run.jsonl") });
    let chunks = 0;
    const count = async (agent: Agent) => {
      let n = 0;
      for await (const event of agent.stream("go")) if (event.type === "message_delta") n++;
      return n;
    };
    chunks = await count(plain);
    await count(recorded);
    const sample = async (agent: Agent) => {
      const start = process.cpuUsage();
      for (let i = 0; i < 5; i++) await count(agent);
      const used = process.cpuUsage(start);
      return (used.user + used.system) / (5 * chunks);
    };
    const off: number[] = [];
    const on: number[] = [];
    const added: number[] = [];
    for (let r = 0; r < rounds; r++) {
      const a = await sample(plain);
      const b = await sample(recorded);
      off.push(a);
      on.push(b);
      added.push(b - a);
    }
    const markdown = `### Recording (bench/record.ts)

One model call streaming ${chunks} text deltas from the fake OpenAI server through the official client,
${rounds} rounds interleaved; CPU µs of this process (the client, the adapter, the loop; the server's
share included, it runs in the same process) per chunk, median [min-max].

| run | µs per chunk |
| --- | ---: |
| not recorded | ${medianRange(off)} |
| recorded (\`record\`) | ${medianRange(on)} |
| added by recording | ${medianRange(added)} |`;
    return { markdown, targets: [] };
  } finally {
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  process.stdout.write(`${(await recordingCost(Number(process.argv[2] ?? 11))).markdown}\n`);
}
