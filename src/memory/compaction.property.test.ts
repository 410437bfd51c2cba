import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { countRequest } from "../../test/support/count-request.js";
import { Agent } from "../agent/agent.js";
import type { Message } from "../core/messages.js";
import type { ModelRequest } from "../models/adapter.js";
import { scriptedModel } from "../testing/scripted-model.js";
import { applyPlan, compactedLog, latestUser, planAt, summaryMessage } from "./compaction.js";
import { tokenCounterFor } from "./tokens.js";

// Random histories of user turns (some with images), replies, and tool turns with one or more
// calls whose results may be errors or carry images.
const text = fc
  .tuple(fc.string({ maxLength: 20 }), fc.nat({ max: 120 }))
  .map(([head, words]) => head + " lorem".repeat(words));
const image = { type: "image" as const, url: "data:image/png;base64,iVBORw0KGgo=" };
const call = fc.record({
  name: fc.constantFrom("calc", "search"),
  args: text,
  result: text,
  isError: fc.boolean(),
  image: fc.boolean(),
});
const turn = fc.oneof(
  fc.record({ role: fc.constant("user" as const), content: text, image: fc.boolean() }),
  fc.record({ role: fc.constant("assistant" as const), content: text, calls: fc.constant([]) }),
  fc.record({
    role: fc.constant("assistant" as const),
    content: text,
    calls: fc.array(call, { minLength: 1, maxLength: 3 }),
  }),
);
type TurnSpec = typeof turn extends fc.Arbitrary<infer T> ? T : never;

function toMessages(spec: TurnSpec, index: number): Message[] {
  if (spec.role === "user")
    return [{ role: "user", content: spec.content, ...(spec.image && { media: [image] }) }];
  if (spec.calls.length === 0) return [{ role: "assistant", content: spec.content }];
  const calls = spec.calls.map((c, i) => ({
    id: `call_${index}_${i}`,
    name: c.name,
    arguments: JSON.stringify({ q: c.args }),
  }));
  return [
    { role: "assistant", content: spec.content, toolCalls: calls },
    ...spec.calls.map((c, i) => ({
      role: "tool" as const,
      toolCallId: `call_${index}_${i}`,
      name: c.name,
      content: c.result,
      isError: c.isError,
      ...(c.image && { media: [image] }),
    })),
  ];
}
const history = fc
  .record({ task: text, turns: fc.array(turn, { maxLength: 40 }) })
  .map(({ task, turns }) => [{ role: "user", content: task } as Message, ...turns.flatMap(toMessages)]);

/** No call without its results right after its reply, no result without its call. */
function orphans(messages: readonly Message[]): string[] {
  const found: string[] = [];
  let open = new Set<string>();
  for (const message of messages) {
    if (message.role === "tool") {
      if (!open.delete(message.toolCallId)) found.push(`result ${message.toolCallId} without its call`);
      continue;
    }
    for (const id of open) found.push(`call ${id} without its result`);
    open = new Set(message.role === "assistant" ? (message.toolCalls ?? []).map((c) => c.id) : []);
  }
  for (const id of open) found.push(`call ${id} without its result`);
  return found;
}

describe("compaction (properties)", () => {
  it("never separates a call from its result, keeps the latest user message, and the log gives back the history", () => {
    fc.assert(
      fc.property(history, fc.nat(), fc.nat(), (messages, a, b) => {
        let current = messages;
        const log = [...messages];
        for (const at of [a, b]) {
          const plan = planAt(current, at % (current.length + 1));
          if (!plan) continue;
          const user = current[latestUser(current)];
          const summary = summaryMessage("summary", plan.replaced, current.length - plan.cut);
          current = applyPlan(current, plan, summary);
          log.push(summary);
          expect(orphans(current)).toEqual([]);
          expect(current).toContain(user);
          expect(current.filter((m) => m.role === "user" && m.compaction)).toHaveLength(1);
          // What a store keeps (every message, each summary appended) loads as this history.
          expect(compactedLog(log)).toEqual(current);
        }
      }),
    );
  });

  it("keeps every request of a run under the budget, whole turns only, the system prompt and the latest user message kept", async () => {
    const counter = tokenCounterFor("scripted");
    let compacted = 0;
    await fc.assert(
      fc.asyncProperty(history, fc.double({ min: 0.3, max: 1, noNaN: true }), async (messages, at) => {
        const model = scriptedModel((request) =>
          request.system.startsWith("You compact") ? { text: "The summary. ".repeat(20) } : { text: "done" },
        );
        const maxContextTokens = 3000;
        const agent = new Agent({ model, instructions: "Be brief.", maxContextTokens, compaction: { at } });
        const input = "the latest request";
        const result = await agent.run(input, { history: messages });
        expect(result.stopReason).toBe("final_answer");
        const request = model.requests.findLast((r) => !r.system.startsWith("You compact")) as ModelRequest;
        expect(request.system).toBe("Be brief.");
        expect(orphans(request.messages)).toEqual([]);
        expect(request.messages.at(-1)).toEqual({ role: "user", content: input });
        // Pruning stays the fallback: whatever compaction left, the request fits.
        const reserve = Math.min(8192, Math.floor(maxContextTokens * 0.15));
        expect(countRequest(request, counter)).toBeLessThanOrEqual(maxContextTokens - reserve);
        expect(orphans(result.messages)).toEqual([]);
        expect(result.messages.at(-2)).toEqual({ role: "user", content: input });
        if (result.messages.some((m) => m.role === "user" && m.compaction)) compacted++;
      }),
      { numRuns: 60 },
    );
    // The histories are long enough that most runs compact: the properties above were exercised.
    expect(compacted).toBeGreaterThan(10);
  });
});
