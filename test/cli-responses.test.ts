/**
 * `agentloop run` on the OpenAI Responses API (`--provider openai-responses`, or `"provider"` in
 * agentloop.json) against the fake Responses server: the tool loop, reasoning as thinking events and
 * carried back encrypted, a failed response and a stream that never completes as model errors.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import {
  type FakeResponsesResponder,
  type FakeResponsesServer,
  startFakeResponsesServer,
} from "../src/testing/fake-responses-server.js";
import { runCli } from "./helpers.js";

const KEY = "sk-test-SECRET-0123456789abcdef";
let server: FakeResponsesServer | undefined;

afterEach(async () => {
  await server?.close();
  server = undefined;
});

async function serve(respond: FakeResponsesResponder) {
  server = await startFakeResponsesServer({ respond });
  return { OPENAI_BASE_URL: server.url, OPENAI_API_KEY: KEY };
}

const SCHEMA = { type: "object", properties: { answer: { type: "string" } }, required: ["answer"] };

const folder = (config: object) => {
  const dir = mkdtempSync(join(tmpdir(), "agentloop-"));
  writeFileSync(join(dir, "agentloop.json"), JSON.stringify(config));
  return dir;
};

describe("agentloop run --provider openai-responses", () => {
  it("runs the tool loop on /v1/responses, thinking as events, encrypted reasoning sent back", async () => {
    const env = await serve([
      {
        reasoning: "Use the calculator.",
        toolCalls: [{ id: "call_1", name: "calculator", arguments: { expression: "157.09 * 493.89" } }],
      },
      { text: "157.09 * 493.89 = 77585.1801" },
    ]);
    const args = [
      "run",
      "--provider",
      "openai-responses",
      "--model",
      "gpt-5-mini",
      "--json",
      "157.09 * 493.89?",
    ];
    const run = await runCli(args, { env });
    expect(run.code).toBe(0);
    const events = run.stdout
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line));
    const thinking = events.filter((e) => e.type === "thinking").map((e) => e.text);
    expect(thinking.join("")).toBe("Use the calculator.");
    expect(events.at(-1)).toMatchObject({
      type: "turn_complete",
      stopReason: "final_answer",
      output: "157.09 * 493.89 = 77585.1801",
    });
    const second = server?.requests[1];
    expect(second?.path).toBe("/v1/responses");
    expect(second?.body).toMatchObject({
      model: "gpt-5-mini",
      store: false,
      include: ["reasoning.encrypted_content"],
    });
    expect(second?.body.input.slice(1)).toEqual([
      {
        type: "reasoning",
        id: "rs_fake_0",
        summary: [{ type: "summary_text", text: "Use the calculator." }],
        encrypted_content: "enc_0",
      },
      {
        type: "function_call",
        call_id: "call_1",
        name: "calculator",
        arguments: '{"expression":"157.09 * 493.89"}',
      },
      { type: "function_call_output", call_id: "call_1", output: "77585.1801" },
    ]);
    expect(run.stderr).not.toContain("SECRET");
  });

  it("keeps the encrypted reasoning in a stored session, and sends it back on the session's next run", async () => {
    const env = await serve([
      {
        reasoning: "Check the time.",
        toolCalls: [{ id: "call_t", name: "get_current_time", arguments: { timezone: "UTC" } }],
      },
      { text: "Done." },
      { text: "Again." },
    ]);
    const cwd = folder({ provider: "openai-responses", model: "gpt-5" });
    expect((await runCli(["run", "--session", "s1", "time?"], { env, cwd })).code).toBe(0);
    const run = await runCli(["run", "--session", "s1", "and again?"], { env, cwd });
    expect(run).toMatchObject({ code: 0, stdout: "Again.\n" });
    const input = server?.requests[2]?.body.input;
    expect(input[1]).toEqual({
      type: "reasoning",
      id: "rs_fake_0",
      summary: [{ type: "summary_text", text: "Check the time." }],
      encrypted_content: "enc_0",
    });
    expect(input.map((item: { type?: string; role?: string }) => item.type ?? item.role)).toEqual([
      "user",
      "reasoning",
      "function_call",
      "function_call_output",
      "message",
      "user",
    ]);
  });

  it('takes "provider": "openai-responses" from agentloop.json', async () => {
    const env = await serve([{ text: "From the Responses API." }]);
    const run = await runCli(["run", "hi"], { env, cwd: folder({ provider: "openai-responses" }) });
    expect(run).toMatchObject({ code: 0, stdout: "From the Responses API.\n", stderr: "" });
    expect(server?.requests[0]?.path).toBe("/v1/responses");
  });

  it("ends with model_error (exit 5) and one line when the response fails or the stream never completes", async () => {
    const failed = {
      text: "Partial",
      end: "failed",
      error: { code: "server_error", message: "The model failed." },
    } as const;
    const opening =
      'event: response.created\ndata: {"type":"response.created","response":{"id":"r","output":[]}}\n\n';
    // The stream that never completes is requested again (retries) before the run gives up.
    const env = await serve((_request, index) => (index === 0 ? failed : { raw: opening }));
    const first = await runCli(["run", "--provider", "openai-responses", "hi"], { env });
    expect(first.code).toBe(5);
    expect(first.stderr.trimEnd().split("\n")).toHaveLength(1);
    expect(first.stderr).toContain("Model API error: The model failed. (server_error)");
    const cut = await runCli(["run", "--provider", "openai-responses", "hi"], {
      env: { ...env, AGENTLOOP_PROVIDER: "openai-responses" },
    });
    expect(cut.code).toBe(5);
    expect(cut.stderr).toContain(
      "Model API stream ended before the response was complete (no response.completed event)",
    );
    expect(cut.stderr.trimEnd().split("\n")).toHaveLength(1);
  });

  it("with --output-schema: a refusal is model_error (exit 5), one stderr line, nothing on stdout", async () => {
    const env = await serve([{ refusal: "I'm sorry, I can't help with that." }]);
    const cwd = folder({ provider: "openai-responses" });
    writeFileSync(join(cwd, "answer.json"), JSON.stringify(SCHEMA));
    const run = await runCli(["run", "--output-schema", "answer.json", "hi"], { env, cwd });
    expect(run).toMatchObject({
      code: 5,
      stdout: "",
      stderr:
        "agentloop: model_error: The model refused to give an answer for the output schema: I'm sorry, I can't help with that.\n",
    });
    expect(server?.requests).toHaveLength(1);
  });

  it("with --output-schema: an answer cut off at max_output_tokens is asked again, saying so", async () => {
    const env = await serve([{ text: '{"answer": "4', end: "incomplete" }, { text: '{"answer": "42"}' }]);
    const cwd = folder({ provider: "openai-responses" });
    writeFileSync(join(cwd, "answer.json"), JSON.stringify(SCHEMA));
    const run = await runCli(["run", "--output-schema", "answer.json", "hi"], { env, cwd });
    expect(run).toMatchObject({ code: 0, stdout: '{"answer":"42"}\n', stderr: "" });
    expect(server?.requests[1]?.body.input.at(-1).content).toMatch(
      /^Your final answer was cut off at the output token limit before it was complete/,
    );
  });

  it("without a schema: an answer cut off at max_output_tokens is printed, with a warning on stderr", async () => {
    const env = await serve(() => ({ text: "The first primes are 2, 3", end: "incomplete" }));
    const run = await runCli(["run", "--provider", "openai-responses", "primes?"], { env });
    expect(run).toMatchObject({
      code: 0,
      stdout: "The first primes are 2, 3\n",
      stderr:
        "agentloop: warning: the answer was cut off at the model's output token limit (finish reason max_output_tokens): it is incomplete; raise the model's output limit or ask for a shorter answer\n",
    });
    const json = await runCli(["run", "--provider", "openai-responses", "--json", "primes?"], { env });
    expect(JSON.parse(json.stdout.trim().split("\n").at(-1) ?? "")).toMatchObject({
      type: "turn_complete",
      stopReason: "final_answer",
      incomplete: "length",
    });
  });

  it('refuses "azure" with the Responses provider, saying what to do (exit 2)', async () => {
    const env = await serve([]);
    const cwd = folder({ provider: "openai-responses", azure: { apiVersion: "2024-10-21" } });
    const run = await runCli(["run", "hi"], { env, cwd });
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/^agentloop: "azure" in agentloop.json is for provider openai .*drop it/);
    expect(server?.requests).toHaveLength(0);
  });
});
