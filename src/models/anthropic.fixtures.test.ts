/**
 * The Anthropic adapter over real HTTP against every recorded Anthropic stream in
 * ../shared/fixtures/llm-streams (provenance and the expected results are in SOURCES.md there).
 * Skipped, saying so, when that folder is absent.
 */
import { readdirSync } from "node:fs";
import { describe, expect, it } from "vitest";
import {
  bare,
  call,
  collect,
  deltaText,
  done,
  FIXTURES,
  fakeServerPerTest,
  fixture,
  recordedData,
} from "../../test/support/model-harness.js";
import { startFakeAnthropicServer } from "../testing/fake-anthropic-server.js";
import type { ModelEvent, ModelReply } from "./adapter.js";
import { anthropicModel } from "./anthropic.js";
import { CUT_OFF_REASON } from "./anthropic-assembler.js";

const haveFixtures = recordedData("llm-streams");
const serve = fakeServerPerTest(startFakeAnthropicServer);

/** Streams the fixture through the adapter and checks the contract: deltas, then exactly one terminal event. */
async function run(name: string): Promise<{ events: ModelEvent[]; reply: ModelReply }> {
  const s = await serve(() => ({ raw: fixture(name) }));
  const model = anthropicModel({
    model: "claude-test",
    apiKey: "sk-ant-test-0000",
    baseURL: s.url,
    maxRetries: 0,
  });
  const events = await collect(model);
  const reply = done(events);
  expect(deltaText(events, "text_delta")).toBe(reply.content);
  expect(deltaText(events, "thinking_delta")).toBe(reply.thinking ?? "");
  return { events, reply };
}

/** What SOURCES.md says each recorded stream must assemble to. */
const STREAMS: Record<string, ModelReply> = {
  "anthropic-messages-text-then-tool-use-split-json.sse.txt": {
    content: "I'll check the current weather in Paris for you.",
    toolCalls: [call("toolu_01NRLabsLyVHZPKxbKvkfSMn", "get_weather", '{"location": "Paris"}')],
    finishReason: "tool_use",
    usage: { inputTokens: 377, outputTokens: 65, cachedInputTokens: 0 },
  },
  "anthropic-messages-text-then-two-tool-use.sse.txt": {
    content:
      "I'll help you generate two potential names for a pet pelican by using the pelican name generator tool.",
    toolCalls: [
      call("toolu_011ouQLPrqhKSuFJtuJrpaUX", "pelican_name_generator", "{}"),
      call("toolu_01NtJRxGhJcEQ4axN1FzHayX", "pelican_name_generator", "{}"),
    ],
    finishReason: "tool_use",
    usage: { inputTokens: 310, outputTokens: 84, cachedInputTokens: 0 },
  },
};

describe.skipIf(!haveFixtures)("anthropicModel over recorded Anthropic streams", () => {
  it("has an expectation for every Anthropic fixture", () => {
    const files = readdirSync(FIXTURES ?? "").filter((f) => f.startsWith("anthropic-"));
    expect(files.sort()).toEqual(
      [
        ...Object.keys(STREAMS),
        "anthropic-messages-thinking-then-tool-use.sse.txt",
        "anthropic-messages-tool-use-truncated-max-tokens.sse.txt",
      ].sort(),
    );
  });

  for (const [name, expected] of Object.entries(STREAMS)) {
    it(`assembles ${name}`, async () => {
      const { events, reply } = await run(name);
      expect(bare(reply)).toEqual(expected);
      expect(JSON.parse(reply.toolCalls[0]?.arguments ?? "")).toEqual(
        name.includes("split-json") ? { location: "Paris" } : {},
      );
      expect(events.filter((e) => e.type === "text_delta").length).toBeGreaterThan(1);
    });
  }

  it("assembles the thinking block, its 524-char signature, then the tool_use", async () => {
    const { events, reply } = await run("anthropic-messages-thinking-then-tool-use.sse.txt");
    expect(reply.thinking).toBe(
      "The user wants me to:\n1. Use the fixed_version tool\n2. Tell them the version\n3. Make a short joke about it\n\n" +
        "Let me first call the fixed_version tool to see what version it returns.",
    );
    const recorded = /"signature_delta","signature":"([^"]+)"/.exec(
      fixture("anthropic-messages-thinking-then-tool-use.sse.txt"),
    )?.[1];
    expect(reply.thinkingSignature).toBe(recorded);
    expect(reply.thinkingSignature).toHaveLength(524);
    expect(reply.thinkingSignature?.startsWith("EoQDCm0I")).toBe(true);
    expect(reply.content).toBe("");
    expect(reply.toolCalls).toEqual([call("toolu_01825dXWLSoJwCst1qTsiWdb", "fixed_version", "{}")]);
    expect(reply.finishReason).toBe("tool_use");
    expect(reply.usage).toEqual({
      inputTokens: 598,
      outputTokens: 92,
      cachedInputTokens: 0,
      reasoningTokens: 53,
    });
    expect(events.filter((e) => e.type === "thinking_delta").length).toBe(2);
  });

  it("marks the tool call cut off by max_tokens as invalid, keeping the partial arguments", async () => {
    const { reply } = await run("anthropic-messages-tool-use-truncated-max-tokens.sse.txt");
    expect(reply.content).toBe(
      "I'll create a comprehensive tax guide for someone with multiple W2s and save it in a file called taxes.txt. Let me do that for you now.",
    );
    expect(reply.finishReason).toBe("max_tokens");
    expect(reply.usage).toEqual({ inputTokens: 450, outputTokens: 124, cachedInputTokens: 0 });
    expect(reply.toolCalls).toEqual([
      {
        id: "toolu_01EKqbqmZrGRXy18eN7m9kvY",
        name: "make_file",
        arguments:
          '{"filename": "taxes.txt", "lines_of_text": [\n"# COMPREHENSIVE TAX GUIDE FOR INDIVIDUALS WITH MULTIPLE W-2s",\n"",\n"## INTRODUCTION",\n"",\n"Filing taxes',
        invalid: CUT_OFF_REASON,
      },
    ]);
  });
});
