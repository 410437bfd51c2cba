import { spawn } from "node:child_process";
import OpenAI from "openai";
import { afterEach, describe, expect, it } from "vitest";
import { type FakeOpenAIServer, startFakeOpenAIServer } from "../src/testing/fake-openai-server.js";
import { CLI } from "./helpers.js";

let upstream: FakeOpenAIServer | undefined;
afterEach(async () => {
  await upstream?.close();
});

/** Starts `agentloop serve --port 0` and resolves with its URL once it listens. */
function startServe(env: Record<string, string>) {
  const child = spawn(process.execPath, [CLI, "serve", "--port", "0"], {
    env: { PATH: process.env.PATH ?? "", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  const exited = new Promise<number | null>((resolve) => child.on("close", resolve));
  const url = new Promise<string>((resolve, reject) => {
    child.stderr.setEncoding("utf8").on("data", (d: string) => {
      stderr += d;
      const match = /on (http:\/\/[^ ]+) /.exec(stderr);
      if (match?.[1]) resolve(match[1]);
    });
    child.on("close", () => reject(new Error(`serve exited: ${stderr}`)));
  });
  return { child, url, exited, stderr: () => stderr };
}

describe("agentloop serve", () => {
  it("serves the agent on 127.0.0.1 to the official client, with auth, and shuts down on SIGTERM", async () => {
    upstream = await startFakeOpenAIServer({
      respond: [
        { toolCalls: [{ name: "calculator", arguments: { expression: "157.09 * 493.89" } }] },
        { text: "It is 77585.1801." },
      ],
    });
    const serve = startServe({
      OPENAI_BASE_URL: upstream.url,
      OPENAI_API_KEY: "sk-upstream",
      AGENTLOOP_API_KEY: "local-key",
    });
    const url = await serve.url;
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const denied = await fetch(`${url}/v1/models`);
    expect(denied.status).toBe(401);
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: "local-key", maxRetries: 0 });
    const stream = await client.chat.completions.create({
      model: "gpt-4o-mini",
      messages: [{ role: "user", content: "157.09 * 493.89?" }],
      stream: true,
    });
    let text = "";
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? "";
    expect(text).toBe("It is 77585.1801.");
    serve.child.kill("SIGTERM");
    expect(await serve.exited).toBe(0);
    expect(serve.stderr()).not.toContain("sk-upstream");
    expect(serve.stderr()).not.toContain("local-key");
  });
});
