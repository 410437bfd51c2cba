/**
 * The built CLI against local model servers (the fake ones): a prompt longer than the server's
 * context says what to change, a cost budget that cannot bite says so once, and an Anthropic base
 * URL given with its `/v1` works.
 */
import { afterEach, describe, expect, it } from "vitest";
import { type FakeAnthropicServer, startFakeAnthropicServer } from "../src/testing/fake-anthropic-server.js";
import { type FakeOpenAIServer, startFakeOpenAIServer } from "../src/testing/fake-openai-server.js";
import { runCli } from "./helpers.js";

let openai: FakeOpenAIServer | undefined;
let anthropic: FakeAnthropicServer | undefined;
afterEach(async () => {
  await openai?.close();
  await anthropic?.close();
  openai = undefined;
  anthropic = undefined;
});

describe("agentloop run against a local model server", () => {
  it("says the prompt exceeded the context and names --max-context-tokens (llama.cpp's exceed_context_size_error)", async () => {
    const body = JSON.stringify({
      error: {
        code: 400,
        message: "request (2176 tokens) exceeds the available context size (2048 tokens), try increasing it",
        type: "exceed_context_size_error",
        n_prompt_tokens: 2176,
        n_ctx: 2048,
      },
    });
    openai = await startFakeOpenAIServer({ respond: [{ status: 400, body }] });
    const run = await runCli(["run", "--base-url", openai.url, "hi"]);
    expect(run.code).toBe(5);
    expect(run.stderr).toBe(
      "agentloop: model_error: The prompt exceeds the model's context window (HTTP 400): request (2176 tokens) exceeds the available context size (2048 tokens), try increasing it; turn on compaction (--compact, config \"compaction\", or the compaction option) to summarise older turns; set --max-context-tokens to the model's context size (a local server's, e.g. llama-server --ctx-size) so the history is pruned to fit\n",
    );
    expect(openai.requests).toHaveLength(1);
  });

  it("warns once that a cost budget has no effect on a model that costs nothing", async () => {
    openai = await startFakeOpenAIServer({ respond: [{ text: "ok" }] });
    const run = await runCli(["run", "--base-url", openai.url, "--cost-budget", "0.5", "hi"]);
    expect(run).toMatchObject({ code: 0, stdout: "ok\n" });
    expect(run.stderr).toBe(
      `agentloop: warning: the cost budget (--cost-budget) has no effect: model 'gpt-4o-mini' costs nothing (a local server, or priced 0); limit the run with --token-budget, or give the model a price in "prices"\n`,
    );
  });

  it("takes ANTHROPIC_BASE_URL with or without its /v1", async () => {
    anthropic = await startFakeAnthropicServer({ respond: [{ text: "bare" }, { text: "with v1" }] });
    for (const [base, answer] of [
      [anthropic.url, "bare"],
      [`${anthropic.url}/v1/`, "with v1"],
    ] as const) {
      const run = await runCli(["run", "--provider", "anthropic", "hi"], {
        env: { ANTHROPIC_BASE_URL: base },
      });
      expect(run).toMatchObject({ code: 0, stdout: `${answer}\n`, stderr: "" });
    }
    expect(anthropic.requests.map((r) => r.path)).toEqual(["/v1/messages", "/v1/messages"]);
  });
});
