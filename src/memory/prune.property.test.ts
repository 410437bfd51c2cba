import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { countRequest } from "../../test/support/count-request.js";
import type { Message } from "../core/messages.js";
import type { ToolSpec } from "../models/adapter.js";
import { scriptedModel } from "../testing/scripted-model.js";
import { type ContextManager, contextManager } from "./prune.js";
import { createTokenCounter, estimateTokens, type TokenCounter, tokenCounterFor } from "./tokens.js";

// Random conversations: a task, then turns of plain replies, user messages, and tool turns with
// one or more (parallel) calls whose results may be errors or invalid calls.
const text = fc
  .tuple(fc.string({ maxLength: 30 }), fc.nat({ max: 200 }))
  .map(([head, words]) => head + " lorem".repeat(words));
const call = fc.record({
  name: fc.constantFrom("calc", "search", "read_file"),
  args: text,
  result: text,
  isError: fc.boolean(),
});
const turn = fc.oneof(
  fc.record({ role: fc.constant("user" as const), content: text }),
  fc.record({ role: fc.constant("assistant" as const), content: text, calls: fc.constant([]) }),
  fc.record({
    role: fc.constant("assistant" as const),
    content: text,
    calls: fc.array(call, { minLength: 1, maxLength: 4 }),
  }),
);
type TurnSpec = typeof turn extends fc.Arbitrary<infer T> ? T : never;
const conversation = fc.record({ task: text, turns: fc.array(turn, { maxLength: 40 }) });
const tools = fc.array(
  fc.record({
    name: fc.constantFrom("calc", "search"),
    description: text,
    parameters: fc.constant({ type: "object" }),
  }),
  { maxLength: 3 },
);

/** Each turn as the loop appends it: an assistant message with calls is followed by all of their results. */
function toMessages(spec: TurnSpec, index: number): Message[] {
  if (spec.role === "user") return [{ role: "user", content: spec.content }];
  if (spec.calls.length === 0) return [{ role: "assistant", content: spec.content }];
  const calls = spec.calls.map((c, i) => ({ id: `call_${index}_${i}`, name: c.name, arguments: c.args }));
  return [
    { role: "assistant", content: spec.content, toolCalls: calls },
    ...spec.calls.map((c, i) => ({
      role: "tool" as const,
      toolCallId: `call_${index}_${i}`,
      name: c.name,
      content: c.result,
      isError: c.isError,
    })),
  ];
}

interface Request {
  history: readonly Message[];
  sent: readonly Message[];
  system: string;
  tools: readonly ToolSpec[];
}

/** Checks what was sent against the history; returns where the kept part starts (1 when nothing was dropped). */
function check(
  { history, sent, system, tools }: Request,
  manager: ContextManager,
  counter: TokenCounter,
): number {
  const fits = countRequest({ system, messages: sent, tools }, counter) <= manager.budget;
  let newestTurn = history.length - 1;
  while (newestTurn > 1 && history[newestTurn]?.role === "tool") newestTurn--;
  if (sent === history) {
    // Sent as is: it fits, or there is nothing that could be dropped.
    expect(fits || newestTurn <= 1).toBe(true);
    return 1;
  }
  // Task, notice, then a contiguous run of the newest messages, in order.
  const cut = history.length - (sent.length - 2);
  expect(sent[0]).toBe(history[0]);
  for (const [i, message] of sent.slice(2).entries()) expect(message).toBe(history[cut + i]);
  expect(cut).toBeGreaterThan(1);
  expect(history[cut]?.role).not.toBe("tool");
  // Within budget, or already down to the task and the newest turn.
  expect(fits || cut === newestTurn).toBe(true);
  // The notice accounts for every removed message.
  const notice = sent[1];
  expect(notice?.role).toBe("user");
  const counts = [...(notice?.content ?? "").matchAll(/\[(?:Summary of )?(\d+) earlier messages/g)];
  expect(counts.reduce((sum, match) => sum + Number(match[1]), 0)).toBe(cut - 1);
  // No orphans either way.
  const calls = new Set(
    sent.flatMap((m) => (m.role === "assistant" ? (m.toolCalls ?? []).map((c) => c.id) : [])),
  );
  const results = new Set(sent.flatMap((m) => (m.role === "tool" ? [m.toolCallId] : [])));
  expect(results).toEqual(calls);
  return cut;
}

const estimate = createTokenCounter(estimateTokens);

describe("contextManager properties", () => {
  it("a growing history: fits, starts with the task, no orphans, order kept, cut only moves forward", async () => {
    await fc.assert(
      fc.asyncProperty(
        conversation,
        fc.string({ maxLength: 400 }),
        tools,
        fc.integer({ min: 150, max: 6_000 }),
        fc.constantFrom(0, 0.2, 0.5),
        async ({ task, turns }, system, toolSpecs, maxContextTokens, headroom) => {
          const manager = contextManager({ modelId: "test", maxContextTokens, reserveTokens: 0, headroom });
          const history: Message[] = [{ role: "user", content: task }];
          let lastCut = 1;
          for (const [index, spec] of turns.entries()) {
            history.push(...toMessages(spec, index));
            const sent = await manager.fit(history, system, toolSpecs);
            const cut = check({ history, sent, system, tools: toolSpecs }, manager, estimate);
            expect(cut).toBeGreaterThanOrEqual(lastCut);
            lastCut = cut;
          }
        },
      ),
      { numRuns: 150 },
    );
  });

  it("a single call keeps as much as fits (no headroom) and returns the history itself when it fits", async () => {
    await fc.assert(
      fc.asyncProperty(
        conversation,
        fc.integer({ min: 150, max: 8_000 }),
        async ({ task, turns }, maxContextTokens) => {
          const manager = contextManager({
            modelId: "test",
            maxContextTokens,
            reserveTokens: 0,
            headroom: 0,
          });
          const history: Message[] = [{ role: "user", content: task }, ...turns.flatMap(toMessages)];
          const sent = await manager.fit(history, "system", []);
          const request = { history, sent, system: "system", tools: [] };
          const cut = check(request, manager, estimate);
          const total = countRequest({ system: "system", messages: history, tools: [] }, estimate);
          expect(sent === history).toBe(total <= manager.budget || cut === 1);
          // The previous turn would not have fitted, with the notice budgeted at its widest.
          let previous = cut - 1;
          while (previous > 1 && history[previous]?.role === "tool") previous--;
          if (cut > 1 && previous > 1) {
            const widest = {
              role: "user" as const,
              content: `[${history.length} earlier messages omitted to fit the context window]`,
            };
            const messages = [history[0] as Message, widest, ...history.slice(previous)];
            expect(countRequest({ system: "system", messages, tools: [] }, estimate)).toBeGreaterThan(
              manager.budget,
            );
          }
        },
      ),
      { numRuns: 200 },
    );
  });

  it("holds with the real tokenizer", async () => {
    const counter = tokenCounterFor("gpt-4o");
    await fc.assert(
      fc.asyncProperty(
        conversation,
        fc.integer({ min: 150, max: 4_000 }),
        async ({ task, turns }, maxContextTokens) => {
          const manager = contextManager({ modelId: "gpt-4o", maxContextTokens, reserveTokens: 0 });
          const history: Message[] = [{ role: "user", content: task }];
          for (const [index, spec] of turns.entries()) {
            history.push(...toMessages(spec, index));
            const sent = await manager.fit(history, "You are helpful.", []);
            check({ history, sent, system: "You are helpful.", tools: [] }, manager, counter);
          }
        },
      ),
      { numRuns: 40 },
    );
  });

  it("sends the same with the real tokenizer whether or not the byte bound spares exact counts", async () => {
    // The default counter for gpt-4o skips exact counts while one token per UTF-8 byte fits; the
    // same tokenizer behind another counter object counts every message exactly.
    const exact = tokenCounterFor("gpt-4o");
    const unicode = fc.string({ unit: "binary", maxLength: 200 });
    await fc.assert(
      fc.asyncProperty(
        conversation,
        fc.array(unicode, { maxLength: 6 }),
        tools,
        fc.integer({ min: 150, max: 4_000 }),
        async ({ task, turns }, extra, toolSpecs, maxContextTokens) => {
          const options = { modelId: "gpt-4o", maxContextTokens, reserveTokens: 0 };
          const bounded = contextManager(options);
          const counted = contextManager({ ...options, counter: createTokenCounter(exact.count) });
          const history: Message[] = [{ role: "user", content: task + extra.join("") }];
          for (const [index, spec] of turns.entries()) {
            history.push(...toMessages(spec, index));
            if (index < extra.length) history.push({ role: "user", content: extra[index] as string });
            const a = await bounded.fit(history, "You are helpful.", toolSpecs);
            const b = await counted.fit(history, "You are helpful.", toolSpecs);
            expect(a === history).toBe(b === history);
            expect(a).toEqual(b);
            const result = extra[index] ?? task;
            expect(bounded.truncateToolResult(result)).toBe(counted.truncateToolResult(result));
          }
        },
      ),
      { numRuns: 60 },
    );
  });

  it("holds with summaries of any length, and with a failing summarizer", async () => {
    await fc.assert(
      fc.asyncProperty(
        conversation,
        fc.integer({ min: 150, max: 6_000 }),
        fc.array(fc.option(text, { nil: undefined }), { minLength: 1, maxLength: 10 }),
        async ({ task, turns }, maxContextTokens, replies) => {
          // undefined replies are failures: the manager falls back to dropping.
          const summarizer = scriptedModel((_, i) => {
            const reply = replies[i % replies.length];
            return reply === undefined ? { error: { code: "http_500", message: "down" } } : { text: reply };
          });
          const manager = contextManager({
            modelId: "test",
            maxContextTokens,
            reserveTokens: 0,
            strategy: "summarize",
            summarizer,
          });
          const history: Message[] = [{ role: "user", content: task }];
          for (const [index, spec] of turns.entries()) {
            history.push(...toMessages(spec, index));
            const sent = await manager.fit(history, "system", []);
            check({ history, sent, system: "system", tools: [] }, manager, estimate);
          }
        },
      ),
      { numRuns: 100 },
    );
  });
});
