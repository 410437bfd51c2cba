import { execFileSync } from "node:child_process";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { countRequest } from "../../test/support/count-request.js";
import type { Message } from "../core/messages.js";
import {
  contextWindowFor,
  countTools,
  createTokenCounter,
  estimateTokens,
  MESSAGE_OVERHEAD,
  tokenCounterFor,
  truncateToTokens,
} from "./tokens.js";

describe("tokenCounterFor", () => {
  it("uses o200k_base for the gpt-4o family, gpt-4.1, gpt-5 and the o-series", () => {
    const counter = tokenCounterFor("gpt-4o-mini");
    for (const id of [
      "gpt-4o",
      "openai/gpt-4.1-mini",
      "gpt-5",
      "o3-mini",
      "o4-mini",
      "chatgpt-4o-latest",
      "GPT-4o",
    ]) {
      expect(tokenCounterFor(id)).toBe(counter);
    }
    expect(counter.count("hello world")).toBe(2);
    expect(counter.count("こんにちは世界")).toBe(2);
  });

  it("uses cl100k_base for gpt-4 and gpt-3.5", () => {
    const counter = tokenCounterFor("gpt-4");
    expect(tokenCounterFor("gpt-3.5-turbo")).toBe(counter);
    expect(tokenCounterFor("gpt-4-turbo")).toBe(counter);
    expect(counter).not.toBe(tokenCounterFor("gpt-4o"));
    expect(counter.count("hello world")).toBe(2);
    expect(counter.count("こんにちは世界")).toBe(4);
  });

  it("estimates for every other model, without loading a tokenizer", () => {
    const counter = tokenCounterFor("llama3.1:8b");
    for (const id of ["claude-sonnet-4-5", "qwen2.5-coder", "mistral", "scripted", ""]) {
      expect(tokenCounterFor(id)).toBe(counter);
    }
    expect(counter.count("abcdefgh")).toBe(2);
    expect(counter.count("abcdefghi")).toBe(3);
    expect(counter.count("")).toBe(0);
  });

  it("loads a tokenizer only on the first real count", () => {
    const script = `
      const { createRequire } = await import("node:module");
      const { tokenCounterFor } = await import(${JSON.stringify(new URL("./tokens.ts", import.meta.url).href)});
      const loaded = () => Object.keys(createRequire(process.cwd() + "/").cache).some((k) => k.includes("gpt-tokenizer"));
      tokenCounterFor("llama3.1").count("hello");
      const counter = tokenCounterFor("gpt-4o");
      const before = loaded();
      counter.count("hello");
      console.log(JSON.stringify([before, loaded()]));`;
    const output = execFileSync(process.execPath, ["--input-type=module", "--no-warnings", "-e", script]);
    expect(JSON.parse(output.toString())).toEqual([false, true]);
  });

  it("counts special-token text as plain text instead of throwing", () => {
    expect(tokenCounterFor("gpt-4o").count("<|endoftext|><|im_start|>")).toBeGreaterThan(2);
    expect(tokenCounterFor("gpt-4").count("<|endoftext|>")).toBeGreaterThan(1);
  });
});

describe("estimateTokens", () => {
  it("charges more for other alphabets and CJK than for ASCII", () => {
    expect(estimateTokens("a".repeat(40))).toBe(10);
    expect(estimateTokens("д".repeat(40))).toBe(20);
    expect(estimateTokens("語".repeat(40))).toBe(40);
  });
});

describe("countMessage", () => {
  const counter = createTokenCounter((text) => text.length);

  it("adds the per-message overhead to the content", () => {
    expect(counter.countMessage({ role: "user", content: "hello" })).toBe(MESSAGE_OVERHEAD + 5);
  });

  it("counts tool calls by name and arguments, and a result's tool name", () => {
    const assistant: Message = {
      role: "assistant",
      content: "ok",
      toolCalls: [
        { id: "a", name: "add", arguments: '{"a":1}' },
        { id: "b", name: "sub", arguments: "{}" },
      ],
    };
    const plain = counter.countMessage({ role: "assistant", content: "ok" });
    expect(counter.countMessage(assistant)).toBe(plain + 2 * 3 + 3 + 7 + 3 + 2);
    const result: Message = { role: "tool", toolCallId: "a", name: "add", content: "2", isError: false };
    expect(counter.countMessage(result)).toBe(MESSAGE_OVERHEAD + 1 + 3);
  });

  it("counts thinking only when it is signed, since only then is it sent back", () => {
    const base = counter.countMessage({ role: "assistant", content: "x" });
    expect(counter.countMessage({ role: "assistant", content: "x", thinking: "hmm" })).toBe(base);
    expect(
      counter.countMessage({ role: "assistant", content: "x", thinking: "hmm", thinkingSignature: "s" }),
    ).toBe(base + 3);
  });
});

describe("contextWindowFor", () => {
  it.each([
    ["gpt-4o", 128_000],
    ["gpt-4o-mini-2024-07-18", 128_000],
    ["openai/gpt-4.1-mini", 1_047_576],
    ["gpt-5-mini", 400_000],
    ["o3", 200_000],
    ["o4-mini", 200_000],
    ["o1-mini", 128_000],
    ["gpt-4-turbo", 128_000],
    ["gpt-4", 8_192],
    ["gpt-3.5-turbo", 16_385],
    ["claude-sonnet-4-5", 200_000],
    ["anthropic/claude-3-5-haiku", 200_000],
    ["llama3.1:8b", 131_072],
    ["llama3.2", 131_072],
    ["llama3", 8_192],
    ["qwen2.5-coder:7b", 32_768],
    ["mistral:7b", 32_768],
    ["mistral-large-latest", 128_000],
  ])("%s has %i tokens", (id, tokens) => {
    expect(contextWindowFor(id)).toBe(tokens);
  });

  it("is undefined for an unknown model", () => {
    expect(contextWindowFor("my-finetune")).toBeUndefined();
    expect(contextWindowFor("scripted")).toBeUndefined();
  });
});

describe("countTools and countRequest", () => {
  const counter = createTokenCounter((text) => text.length);
  const tool = { name: "add", description: "Adds.", parameters: { type: "object" } };

  it("counts names, descriptions and schemas; nothing for no tools", () => {
    expect(countTools([], counter)).toBe(0);
    expect(countTools([tool], counter)).toBe(3 + 3 + 5 + JSON.stringify(tool.parameters).length);
  });

  it("sums system, tools and messages", () => {
    const messages: Message[] = [{ role: "user", content: "hi" }];
    const request = { system: "sys", messages, tools: [tool] };
    const expected =
      3 + (MESSAGE_OVERHEAD + 3) + countTools([tool], counter) + counter.countMessage(messages[0] as Message);
    expect(countRequest(request, counter)).toBe(expected);
    expect(countRequest({ system: "", messages: [], tools: [] }, counter)).toBe(3);
  });
});

describe("truncateToTokens", () => {
  const estimate = createTokenCounter(estimateTokens);

  it("returns the text itself when it fits", () => {
    const text = "short text";
    expect(truncateToTokens(text, 100, estimate)).toBe(text);
  });

  it("keeps the beginning and ends with a visible marker", () => {
    const text = "0123456789".repeat(1_000);
    const cut = truncateToTokens(text, 200, estimate);
    expect(estimate.count(cut)).toBeLessThanOrEqual(200);
    expect(estimate.count(cut)).toBeGreaterThan(150);
    expect(cut.startsWith("0123456789")).toBe(true);
    expect(cut).toMatch(/\n\[\.\.\. truncated: the full text has 2500 tokens\]$/);
  });

  it("degrades to a bare marker, then nothing, for tiny limits", () => {
    expect(truncateToTokens("x".repeat(1_000), 3, estimate)).toBe("[truncated]");
    expect(truncateToTokens("x".repeat(1_000), 1, estimate)).toBe("");
  });

  it("never exceeds the limit nor splits a surrogate pair (property, both tokenizers)", () => {
    const real = tokenCounterFor("gpt-4o");
    fc.assert(
      fc.property(
        fc.string({ unit: "binary", maxLength: 3_000 }),
        fc.integer({ min: 0, max: 400 }),
        fc.boolean(),
        (text, maxTokens, useReal) => {
          const counter = useReal ? real : estimate;
          const cut = truncateToTokens(text, maxTokens, counter);
          expect(counter.count(cut)).toBeLessThanOrEqual(Math.max(maxTokens, 0));
          if (cut !== text) expect(cut === "" || cut.includes("truncated")).toBe(true);
          const kept = cut.replace(/\n\[\.\.\. truncated: the full text has \d+ tokens\]$/, "");
          if (cut.includes("the full text has")) expect(text.startsWith(kept)).toBe(true);
          const last = kept.charCodeAt(kept.length - 1);
          const next = text.charCodeAt(kept.length);
          expect(last >= 0xd800 && last <= 0xdbff && next >= 0xdc00 && next <= 0xdfff).toBe(false);
        },
      ),
      { numRuns: 300 },
    );
  });
});
