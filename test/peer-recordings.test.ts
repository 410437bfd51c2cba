/**
 * Every Chat Completions and Anthropic Messages recording in ../shared/fixtures/peer-recordings
 * (real provider traffic kept by other projects' suites), served by a fake server with the framing
 * its manifest entry names and assembled by our adapter through the official SDK client, as in
 * production. Each must assemble to what a trusted peer assembles (test/support/peer-expectations.json:
 * text and reasoning, tool calls with their ids, names and parsed arguments, the finish reason, usage,
 * a refusal, or an error that stays an error). The Responses API recordings (`responses/`) go
 * through `openAIResponsesModel` the same way, against test/support/peer-responses-expectations.json,
 * which was derived from each recording's final response object (`response.completed`'s output,
 * or the JSON body), not from its deltas: text, function calls assembled item by item (parallel
 * ones in call order), reasoning summaries as thinking, usage with cached and reasoning tokens,
 * incomplete responses, refusals, `response.failed`, error events mid-stream and streams without
 * `response.completed`; and a recording's encrypted reasoning goes back, byte for byte, on the
 * next request. Skipped, saying so, when the folder is absent.
 */
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import type { Message } from "../src/core/messages.js";
import type { Model, ModelEvent, ModelReply } from "../src/models/adapter.js";
import { anthropicModel } from "../src/models/anthropic.js";
import { openAIChatModel } from "../src/models/openai-chat.js";
import { openAIResponsesModel } from "../src/models/openai-responses.js";
import { RESPONSES_DATA_KEY, type ResponsesData } from "../src/models/openai-responses-wire.js";
import { startFakeAnthropicServer } from "../src/testing/fake-anthropic-server.js";
import { startFakeOpenAIServer } from "../src/testing/fake-openai-server.js";
import { type FakeResponsesServer, startFakeResponsesServer } from "../src/testing/fake-responses-server.js";
import {
  bare,
  collect,
  deltaText,
  done,
  errorOf,
  fakeServerPerTest,
  HI,
  recordedData,
} from "./support/model-harness.js";
import {
  type PeerEntry,
  peerEntries,
  peerResponse,
  type ResponsesEntry,
  responsesBody,
  responsesEntries,
  responsesOutputItems,
} from "./support/peer-recordings.js";

/** Short text as is; long text by its length in code points, its start and its SHA-256 (hex, first 16). */
type ExpectedText = string | { chars: number; starts: string; sha256: string };

interface Expected {
  text?: ExpectedText;
  thinking?: ExpectedText;
  toolCalls?: { id: string; name: string; arguments: unknown }[];
  finishReason?: string;
  usage?: ModelReply["usage"];
  refusal?: string;
  error?: { code: string; status?: number };
  /** Responses: how many reasoning items (with encrypted content) the reply carries back. */
  reasoningItems?: number;
}

const expectations = (file: string) =>
  JSON.parse(readFileSync(new URL(`./support/${file}`, import.meta.url), "utf8")) as Record<string, Expected>;
const EXPECTED = expectations("peer-expectations.json");
const EXPECTED_RESPONSES = expectations("peer-responses-expectations.json");

const present = recordedData("peer-recordings");
const serveChat = fakeServerPerTest(startFakeOpenAIServer);
const serveAnthropic = fakeServerPerTest(startFakeAnthropicServer);
const serveResponses = fakeServerPerTest(startFakeResponsesServer);

/** The adapter for `entry` against a fake server that answers with the recording. */
async function adapterFor(entry: PeerEntry): Promise<Model> {
  const { status, contentType, body } = peerResponse(entry);
  const answer = { raw: body, status, headers: { "content-type": contentType } };
  const options = { model: "peer-model", apiKey: "sk-test-0000", maxRetries: 0 };
  if (entry.protocol === "anthropic") {
    const s = await serveAnthropic(() => answer);
    return anthropicModel({ ...options, baseURL: s.url });
  }
  const s = await serveChat(() => answer);
  return openAIChatModel({ ...options, baseURL: s.url, stream: entry.mode === "stream" });
}

/** `openAIResponsesModel` against a fake server that answers every request with a Responses recording. */
async function responsesAdapterFor(
  entry: ResponsesEntry,
): Promise<{ model: Model; server: FakeResponsesServer }> {
  const answer = {
    raw: responsesBody(entry),
    status: entry.status,
    headers: { "content-type": entry.contentType },
  };
  const server = await serveResponses(() => answer);
  const options = { model: "peer-model", apiKey: "sk-test-0000", maxRetries: 0, baseURL: server.url };
  return { model: openAIResponsesModel({ ...options, stream: entry.mode === "stream" }), server };
}

/**
 * The reply's items as the next request must carry them back, in the recording's output order:
 * each reasoning item with encrypted content as the official SDKs send it with `store: false`
 * (its JSON text: type, id, summary, encrypted content), each function call by its call id.
 */
function carriedBack(output: Record<string, unknown>[]): string[] {
  const keys: string[] = [];
  for (const item of output) {
    if (item.type === "function_call") keys.push(`call ${item.call_id}`);
    if (item.type !== "reasoning" || typeof item.encrypted_content !== "string") continue;
    const summary = (item.summary as { text: string }[]).map(({ text }) => ({ type: "summary_text", text }));
    keys.push(
      JSON.stringify({
        type: "reasoning",
        ...(typeof item.id === "string" && { id: item.id }),
        summary,
        encrypted_content: item.encrypted_content,
      }),
    );
  }
  return keys;
}

/** The same, read from a request's input items (the reasoning items' JSON text as sent). */
const sentBack = (input: Record<string, unknown>[]): string[] =>
  input.flatMap((item) =>
    item.type === "reasoning"
      ? [JSON.stringify(item)]
      : item.type === "function_call"
        ? [`call ${item.call_id}`]
        : [],
  );

/** Checks one adapter call's events against what the recording must assemble to. */
function expectReply(events: ModelEvent[], expected: Expected): ModelReply | undefined {
  if (expected.error) {
    expect(errorOf(events)).toMatchObject(expected.error);
    return undefined;
  }
  const reply = done(events);
  expectText(reply.content, expected.text, "text");
  expectText(reply.thinking ?? "", expected.thinking, "thinking");
  // What streamed is what was assembled.
  expect(deltaText(events, "text_delta")).toBe(reply.content);
  expect(deltaText(events, "thinking_delta")).toBe(reply.thinking ?? "");
  const calls = reply.toolCalls.map((c) => ({
    id: c.id,
    name: c.name,
    arguments: JSON.parse(c.arguments),
  }));
  expect(calls).toEqual(expected.toolCalls ?? []);
  expect(reply.toolCalls.every((c) => c.invalid === undefined)).toBe(true);
  expect(reply.finishReason).toBe(expected.finishReason);
  expect(reply.usage).toEqual(expected.usage);
  expect(reply.refusal).toBe(expected.refusal);
  return reply;
}

function expectText(actual: string, expected: ExpectedText | undefined, what: string): void {
  if (expected === undefined || typeof expected === "string") {
    expect(actual, what).toBe(expected ?? "");
    return;
  }
  expect(actual.slice(0, expected.starts.length), what).toBe(expected.starts);
  expect([...actual].length, what).toBe(expected.chars); // code points
  expect(createHash("sha256").update(actual).digest("hex").slice(0, 16), what).toBe(expected.sha256);
}

describe.skipIf(!present)("peer recordings through the adapters", () => {
  const entries = peerEntries();

  it("has an expectation for every entry of the manifest, and nothing else", () => {
    expect(entries.length).toBeGreaterThan(100);
    expect(Object.keys(EXPECTED).sort()).toEqual(entries.map((e) => e.id).sort());
  });

  for (const entry of entries) {
    const expected = EXPECTED[entry.id] ?? {};
    it(`${entry.protocol} ${entry.mode} ${entry.id} (${entry.peer})`, async () => {
      expectReply(await collect(await adapterFor(entry)), expected);
    });
  }
});

describe.skipIf(!present)("Responses API recordings through openAIResponsesModel", () => {
  const entries = responsesEntries();

  it("has an expectation for every entry of responses/manifest.json, and nothing else", () => {
    expect(entries.length).toBeGreaterThan(40);
    expect(Object.keys(EXPECTED_RESPONSES).sort()).toEqual(entries.map((e) => e.id).sort());
  });

  for (const entry of entries) {
    const expected = EXPECTED_RESPONSES[entry.id] ?? {};
    it(`responses ${entry.mode} ${entry.id} (${entry.real ? "real" : "synthetic"})`, async () => {
      const { model, server } = await responsesAdapterFor(entry);
      const reply = expectReply(await collect(model), expected);
      if (!reply) return;
      // Nothing else: no empty thinking, no provider data without encrypted reasoning (hosted
      // tool items, annotations and reasoning without encrypted content leave no trace).
      const keys = ["content", "toolCalls", "finishReason", "usage"];
      if (expected.thinking !== undefined) keys.push("thinking");
      if (expected.refusal !== undefined) keys.push("refusal");
      if (expected.reasoningItems) keys.push("providerData");
      expect(Object.keys(bare(reply)).sort()).toEqual(keys.sort());
      // Encrypted reasoning is kept, to go back with the next request.
      const data = reply.providerData?.[RESPONSES_DATA_KEY] as ResponsesData | undefined;
      const reasoning = data?.items.filter((item) => item.type === "reasoning") ?? [];
      expect(reasoning.length).toBe(expected.reasoningItems ?? 0);
      if (!expected.reasoningItems) return;
      // The next request (the call results, or the user's next message) carries the reasoning
      // back as the recording had it, before the calls it led to.
      const assistant: Message = {
        role: "assistant",
        content: reply.content,
        ...(reply.toolCalls.length > 0 && { toolCalls: reply.toolCalls }),
        providerData: JSON.parse(JSON.stringify(reply.providerData)), // as a store keeps it
      };
      const after: Message[] =
        reply.toolCalls.length > 0
          ? reply.toolCalls.map((c) => ({
              role: "tool",
              toolCallId: c.id,
              name: c.name,
              content: "ok",
              isError: false,
            }))
          : [{ role: "user", content: "And then?" }];
      await collect(model, { ...HI, messages: [...HI.messages, assistant, ...after] });
      expect(sentBack(server.requests[1]?.body.input)).toEqual(carriedBack(responsesOutputItems(entry)));
    });
  }
});
