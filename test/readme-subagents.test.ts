// The README's sub-agents section runs as written: its agentloop.json with its command, and its
// library program, against the fake OpenAI server (which tells the agents apart by their
// system prompt and tools).
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import type { FakeRequest } from "../src/testing/fake-http.js";
import { type FakeOpenAIServer, startFakeOpenAIServer } from "../src/testing/fake-openai-server.js";
import { runCli } from "./helpers.js";

const ROOT = new URL("../", import.meta.url);
const readme = readFileSync(new URL("README.md", ROOT), "utf8");
const section = readme.slice(readme.indexOf("## Sub-agents"), readme.indexOf("## Features and reference"));
const dir = mkdtempSync(join(tmpdir(), "agentloop-readme-sub-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let server: FakeOpenAIServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

/** Which agent asks: the lead delegates, the researcher has convert_temperature, the writer no tools. */
function who(request: FakeRequest): string {
  const tools = ((request.body.tools ?? []) as { function: { name: string } }[]).map((t) => t.function.name);
  if (tools.includes("delegate_task")) return "lead";
  if (tools.includes("convert_temperature")) return "researcher";
  if (tools.length === 0) return "writer";
  return "lead";
}

function team(): Promise<FakeOpenAIServer> {
  return startFakeOpenAIServer({
    respond: (request) => {
      const messages = (request.body.messages ?? []) as { role: string }[];
      const replies = messages.filter((m) => m.role === "assistant").length;
      switch (who(request)) {
        case "researcher":
          return replies === 0
            ? {
                toolCalls: [
                  { name: "convert_temperature", arguments: { value: 100, from_unit: "C", to_unit: "F" } },
                ],
              }
            : { text: "Water boils at 212 F." };
        case "writer":
          return { text: "At sea level, water boils at 212 degrees Fahrenheit." };
        default: {
          const tools = ((request.body.tools ?? []) as { function: { name: string } }[]).map(
            (t) => t.function.name,
          );
          const toWriter = tools.includes("writer")
            ? { name: "writer", arguments: { task: "Notes: 212 F." } }
            : { name: "delegate_task", arguments: { agent: "writer", task: "Notes: 212 F." } };
          if (replies === 0)
            return {
              toolCalls: [
                {
                  name: "delegate_task",
                  arguments: { agent: "researcher", task: "Boiling point of water in F?" },
                },
              ],
            };
          if (replies === 1) return { toolCalls: [toWriter] };
          return { text: "At sea level, water boils at 212 degrees Fahrenheit." };
        }
      }
    },
  });
}

describe("the README's sub-agents", () => {
  it("the config and the command run as written: the researcher on its cheap model, its work shown under the call", async () => {
    server = await team();
    const config = /```json\n([\s\S]*?)```/.exec(section)?.[1] as string;
    writeFileSync(join(dir, "agentloop.json"), config);
    const command = /`npx agentloop-runtime (run [^`]*)`/.exec(section)?.[1] as string;
    const args = [...command.matchAll(/"([^"]*)"|(\S+)/g)].map((m) => (m[1] ?? m[2]) as string);
    const run = await runCli(args, {
      cwd: dir,
      env: { OPENAI_BASE_URL: server.url, OPENAI_API_KEY: "sk-test" },
    });
    expect(run.code).toBe(0);
    expect(run.stdout).toBe("At sea level, water boils at 212 degrees Fahrenheit.\n");
    expect(run.stderr).toMatch(/ {4}researcher {3}→ convert_temperature/);
    expect(server.requests.map((r) => [who(r), r.body.model])).toEqual([
      ["lead", "gpt-4o"],
      ["researcher", "gpt-4o-mini"],
      ["researcher", "gpt-4o-mini"],
      ["lead", "gpt-4o"],
      ["writer", "gpt-4o"],
      ["lead", "gpt-4o"],
    ]);
  });

  it("the library program runs as written", async () => {
    server = await team();
    const program = /```ts\n([\s\S]*?)```/.exec(section)?.[1] as string;
    const dist = new URL("dist/", ROOT).href;
    // The program's imports point at this checkout's build; TypeScript is stripped by Node.
    writeFileSync(
      join(dir, "lead.mts"),
      program
        .replace('"agentloop-runtime/openai"', JSON.stringify(`${dist}models/openai.js`))
        .replace('"agentloop-runtime"', JSON.stringify(`${dist}index.js`)),
    );
    const { stdout } = await promisify(execFile)(process.execPath, [join(dir, "lead.mts")], {
      env: { PATH: process.env.PATH ?? "", OPENAI_BASE_URL: server.url, OPENAI_API_KEY: "sk-test" },
    });
    expect(stdout).toContain("At sea level, water boils at 212 degrees Fahrenheit.");
    expect(server.requests.map(who)).toEqual(["lead", "researcher", "researcher", "lead", "writer", "lead"]);
  });
});
