import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { type FakeOpenAIServer, startFakeOpenAIServer } from "../src/testing/fake-openai-server.js";
import { runCli } from "./helpers.js";
import { startServe } from "./support/serve-process.js";

const GATE_SERVER = new URL("./support/gate-mcp-server.mjs", import.meta.url).pathname;

let upstream: FakeOpenAIServer | undefined;
afterEach(async () => {
  await upstream?.close();
});

/** Whether a process runs (a zombie does not: an orphan may wait a while to be reaped). */
const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  const stat = existsSync(`/proc/${pid}/stat`) ? readFileSync(`/proc/${pid}/stat`, "utf8") : "";
  return !/\) [ZX] /.test(stat);
};

describe("agentloop serve with a store", () => {
  it("resumes a run whose server was killed mid-tool on a new server: the finished call is not run again, the model not asked again", async () => {
    const dir = mkdtempSync(join(tmpdir(), "agentloop-serve-resume-"));
    const log = join(dir, "tools.log");
    const gate = join(dir, "gate");
    const config = join(dir, "agentloop.json");
    writeFileSync(
      config,
      JSON.stringify({ mcpServers: { gate: { command: process.execPath, args: [GATE_SERVER, log, gate] } } }),
    );
    upstream = await startFakeOpenAIServer({
      respond: [
        {
          text: "Noting, then waiting.",
          toolCalls: [
            { id: "n1", name: "note", arguments: { text: "one" } },
            { id: "w1", name: "wait_for_file", arguments: {} },
          ],
        },
        { text: "All done." },
      ],
    });
    const env = {
      OPENAI_BASE_URL: upstream.url,
      OPENAI_API_KEY: "sk-upstream",
      AGENTLOOP_DB: join(dir, "runs.db"),
    };
    const lines = () => (existsSync(log) ? readFileSync(log, "utf8").trim().split("\n") : []);

    const first = startServe(env, ["--config", config]);
    const url = await first.url();
    const [stored] = await first.waitFor(/runs stored in .* \(AGENTLOOP_DB\)/);
    expect(stored).toBe(`runs stored in ${join(dir, "runs.db")} (AGENTLOOP_DB)`);
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ messages: [{ role: "user", content: "note one, then wait" }], stream: true }),
    });
    const reader = res.body?.getReader() as ReadableStreamDefaultReader<Uint8Array>;
    let seen = "";
    // The note's result is streamed only once it is stored; then the wait is in flight.
    while (!/"type":"tool_result","id":"n1"/.test(seen))
      seen += new TextDecoder().decode((await reader.read()).value);
    await expect.poll(lines).toContain("wait started");
    const runId = /"id":"(chatcmpl-[^"]+)"/.exec(seen)?.[1] as string;

    first.child.kill("SIGKILL");
    await first.exited;
    await reader.read().catch(() => {}); // the stream broke off
    // Its MCP server ends with it (stdin closed) before the gate opens, so only the new one can finish the wait.
    const oldPid = Number(lines()[0]?.replace("pid ", ""));
    await expect.poll(() => alive(oldPid)).toBe(false);
    writeFileSync(gate, "");

    const second = startServe(env, ["--config", config]);
    const url2 = await second.url();
    const view = await fetch(`${url2}/v1/runs/${runId}`);
    expect(await view.json()).toMatchObject({ id: runId, status: "interrupted" });
    const resumed = await fetch(`${url2}/v1/runs/${runId}/resume`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}",
    });
    expect(resumed.status).toBe(200);
    expect(await resumed.json()).toMatchObject({
      id: runId,
      object: "chat.completion",
      choices: [{ message: { content: "All done." }, finish_reason: "stop" }],
      agentloop: { type: "turn_complete", stopReason: "final_answer", runId, iterations: 2 },
    });

    // The model was asked twice in all (never again for the first reply), and read both results in call order.
    expect(upstream.requests).toHaveLength(2);
    type WireMessage = { role: string; tool_call_id?: string; content: string };
    const sent: WireMessage[] = upstream.requests[1]?.body.messages ?? [];
    const results = sent.filter((m) => m.role === "tool").map((m) => [m.tool_call_id, m.content]);
    expect(results).toEqual([
      ["n1", "noted"],
      ["w1", "gate open"],
    ]);
    // The note ran once; the wait that was in flight ran again, and finished once.
    const tools = lines().filter((line) => !line.startsWith("pid "));
    expect(tools.filter((line) => line === "note one")).toHaveLength(1);
    expect(tools.filter((line) => line === "wait started")).toHaveLength(2);
    expect(tools.filter((line) => line === "wait done")).toHaveLength(1);
    expect(tools.at(-1)).toBe("wait done");
    expect(await (await fetch(`${url2}/v1/runs/${runId}`)).json()).toMatchObject({ status: "completed" });
    second.child.kill("SIGTERM");
    expect(await second.exited).toBe(0);
  });

  it('stores where run --session does by default (.agentloop/agentloop.db), nothing with --no-store or config "serve": {"store": false} (the runs endpoints say how to get a store), and where config "db" says', async () => {
    upstream = await startFakeOpenAIServer({ respond: () => ({ text: "hi" }) });
    const env = { OPENAI_BASE_URL: upstream.url, OPENAI_API_KEY: "sk-upstream" };
    const chat = (url: string, headers: Record<string, string> = {}) =>
      fetch(`${url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", ...headers },
        body: JSON.stringify({ messages: [{ role: "user", content: "hi" }] }),
      });

    const plain = mkdtempSync(join(tmpdir(), "agentloop-serve-default-"));
    const embedded = startServe(env, [], plain);
    const url0 = await embedded.url();
    await embedded.waitFor(/runs stored in \S+\.agentloop\/agentloop\.db \(the default\)/);
    const first = (await (await chat(url0, { "x-agentloop-session": "s1" })).json()) as { id: string };
    expect(await (await fetch(`${url0}/v1/runs/${first.id}`)).json()).toMatchObject({
      sessionId: "s1",
      status: "completed",
    });
    embedded.child.kill("SIGTERM");
    expect(await embedded.exited).toBe(0);
    expect(existsSync(join(plain, ".agentloop", "agentloop.db"))).toBe(true);

    const none = mkdtempSync(join(tmpdir(), "agentloop-serve-nostore-"));
    writeFileSync(join(none, "off.json"), JSON.stringify({ serve: { store: false } }));
    for (const args of [["--no-store"], ["--config", join(none, "off.json")]]) {
      const bare = startServe(env, args, none);
      const url = await bare.url();
      await bare.waitFor(/runs are not stored \((--no-store|"serve": \{"store": false\} in \S+off\.json)\)/);
      const { id } = (await (await chat(url)).json()) as { id: string };
      const approvals = await fetch(`${url}/v1/runs/${id}/approvals`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ approve: "all" }),
      });
      expect(approvals.status).toBe(501);
      expect(((await approvals.json()) as { error: { message: string } }).error.message).toContain(
        "--no-store",
      );
      bare.child.kill("SIGTERM");
      expect(await bare.exited).toBe(0);
      expect(existsSync(join(none, ".agentloop"))).toBe(false);
      expect(bare.stderr()).not.toContain("runs stored");
    }

    const configured = mkdtempSync(join(tmpdir(), "agentloop-serve-configdb-"));
    writeFileSync(join(configured, "agentloop.json"), JSON.stringify({ db: "data/runs.db" }));
    const stored = startServe(env, [], configured);
    const url2 = await stored.url();
    await stored.waitFor(/runs stored in \S+data\/runs\.db \("db" in agentloop\.json\)/);
    const second = (await (await chat(url2)).json()) as { id: string };
    expect(await (await fetch(`${url2}/v1/runs/${second.id}`)).json()).toMatchObject({
      status: "completed",
      stopReason: "final_answer",
    });
    stored.child.kill("SIGTERM");
    expect(await stored.exited).toBe(0);
    expect(existsSync(join(configured, "data", "runs.db"))).toBe(true);
  });

  it("where the default store cannot be made (a read-only folder), refuses to start in one line naming --no-store", async () => {
    const dir = mkdtempSync(join(tmpdir(), "agentloop-serve-unwritable-"));
    writeFileSync(join(dir, ".agentloop"), ""); // a file where the store's folder would go
    const env = { OPENAI_BASE_URL: "http://127.0.0.1:9/v1", OPENAI_API_KEY: "sk-upstream" };
    const run = await runCli(["serve", "--port", "0"], { env, cwd: dir });
    expect(run.code).toBe(2);
    expect(run.stderr.trim().split("\n")).toHaveLength(1);
    expect(run.stderr).toMatch(/\.agentloop\/agentloop\.db cannot be created: .*--no-store/);
  });
});
