import { spawn } from "node:child_process";
import { afterEach, describe, expect, it } from "vitest";
import { type FakeOpenAIServer, type FakeResponse, startFakeOpenAIServer } from "../src/testing/index.js";
import { CLI } from "./helpers.js";

let upstream: FakeOpenAIServer | undefined;
afterEach(async () => {
  await upstream?.close();
});

/** Starts the built `agentloop serve --port 0`; `waitFor` resolves when stderr matches. */
function startServe(env: Record<string, string>) {
  const child = spawn(process.execPath, [CLI, "serve", "--port", "0"], {
    env: { PATH: process.env.PATH ?? "", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  const watchers: (() => void)[] = [];
  child.stderr.setEncoding("utf8").on("data", (d: string) => {
    stderr += d;
    for (const watch of watchers) watch();
  });
  const exited = new Promise<number | null>((resolve) => child.on("close", resolve));
  const waitFor = (pattern: RegExp) =>
    new Promise<RegExpExecArray>((resolve, reject) => {
      const watch = () => {
        const match = pattern.exec(stderr);
        if (match) resolve(match);
      };
      watchers.push(watch);
      watch();
      void exited.then(() => reject(new Error(`serve exited: ${stderr}`)));
    });
  return { child, exited, waitFor, stderr: () => stderr };
}

describe("agentloop serve, shutting down", () => {
  it("on SIGTERM refuses new requests with 503, lets the stream in flight finish, then exits 0", async () => {
    let release: (reply: FakeResponse) => void = () => {};
    const held = new Promise<FakeResponse>((resolve) => {
      release = resolve;
    });
    let received: () => void = () => {};
    const requested = new Promise<void>((resolve) => {
      received = resolve;
    });
    upstream = await startFakeOpenAIServer({
      respond: () => {
        received();
        return held;
      },
    });
    const serve = startServe({ OPENAI_BASE_URL: upstream.url, OPENAI_API_KEY: "sk-upstream" });
    const [, url] = await serve.waitFor(
      /serving \S+ on (http:\/\/\S+) \(OpenAI-compatible: \/v1\/chat\/completions\)\n/,
    );
    const chat = (stream: boolean) =>
      fetch(`${url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ messages: [{ role: "user", content: "hi" }], stream }),
      });
    const inFlight = chat(true);
    await requested;
    serve.child.kill("SIGTERM");
    await serve.waitFor(/shutting down/);
    const late = await chat(false);
    expect(late.status).toBe(503);
    expect(((await late.json()) as { error: { code: string } }).error.code).toBe("shutting_down");
    release({ text: "Finished after SIGTERM." });
    const body = await (await inFlight).text();
    expect(body).toContain("Finished after SIGTERM.");
    expect(body).toContain('"stopReason":"final_answer"');
    expect(body.endsWith("data: [DONE]\n\n")).toBe(true);
    expect(await serve.exited).toBe(0);
    expect(serve.stderr()).not.toContain("sk-upstream");
  });
});
