/**
 * Model API faults through the built CLI binary (run `npm run build` first): recovery exits 0,
 * failures exit 5 with one line on stderr, and the key never appears in stdout or stderr.
 */
import { afterEach, describe, expect, it } from "vitest";
import {
  type FakeOpenAIServer,
  type FakeResponder,
  startFakeOpenAIServer,
} from "../src/testing/fake-openai-server.js";
import { type CliRun, runCli } from "./helpers.js";

const KEY = "sk-test-SECRET-9d8c7b6a5f4e";
let server: FakeOpenAIServer | undefined;

afterEach(async () => {
  await server?.close();
  server = undefined;
});

async function agentloop(respond: FakeResponder, args: string[] = []): Promise<CliRun> {
  server = await startFakeOpenAIServer({ respond });
  const env = { OPENAI_BASE_URL: server.url, OPENAI_API_KEY: KEY };
  const run = await runCli(["run", ...args, "hi"], { env });
  expect(run.stdout + run.stderr).not.toMatch(/SECRET|9d8c7b6a5f4e/);
  return run;
}

const NGINX_502 = `<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n<!-- api-key: ${KEY} -->\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n`;

describe("agentloop run on model API faults", () => {
  it("recovers from a connection reset, two 500s and a stream cut before any text", async () => {
    const error = { status: 500, headers: { "retry-after-ms": "1" } };
    const run = await agentloop([
      { reset: true },
      error,
      error,
      { cutMidChunk: true },
      { text: "Recovered." },
    ]);
    expect(run).toMatchObject({ code: 0, stdout: "Recovered.\n", stderr: "" });
    expect(server?.requests).toHaveLength(5);
  });

  it("exits 5 with a one-line summary of a persistent HTML 502 page", async () => {
    const page = {
      status: 502,
      headers: { "content-type": "text/html", "retry-after-ms": "1" },
      body: NGINX_502,
    };
    const run = await agentloop(() => page);
    expect(run.code).toBe(5);
    expect(run.stderr).toBe(
      "agentloop: model_error: Model API error (HTTP 502): Bad Gateway (an HTML page, probably from a proxy)\n",
    );
    expect(server?.requests).toHaveLength(4);
  });

  it("exits 5 on a stream cut after text, and on invalid JSON", async () => {
    const cut = await agentloop(() => ({ cutMidChunk: true, afterText: "Half an answer" }), ["--json"]);
    expect(cut.code).toBe(5);
    const last = JSON.parse(cut.stdout.trim().split("\n").at(-1) as string);
    expect(last).toMatchObject({ type: "turn_complete", stopReason: "model_error" });
    expect(cut.stdout).toContain('"code":"stream_incomplete"');
    await server?.close();

    const json = await agentloop(() => ({
      raw: 'data: {"choices":[{"index":0,"delta":{"content":\n\ndata: [DONE]\n\n',
    }));
    expect(json.code).toBe(5);
    expect(json.stderr).toMatch(/^agentloop: model_error: Model API returned an invalid response: .*\n$/);
  });

  it("exits 5 when a proxy answers the stream with an HTML page", async () => {
    const page = `<!doctype html><html><head><title>Corporate proxy: log in</title></head><body>${KEY}</body></html>`;
    const run = await agentloop(() => ({ raw: page, headers: { "content-type": "text/html" } }));
    expect(run.code).toBe(5);
    expect(run.stderr).toContain("an HTML page (Corporate proxy: log in) instead of an event stream");
    expect(run.stderr.trim().split("\n")).toHaveLength(1);
    expect(server?.requests).toHaveLength(1);
  });
});
