/**
 * `POST /v1/responses/compact`: a conversation compacted by one call of the served agent's model,
 * its `compaction` item taken back as input by `POST /v1/responses`, and the requests it refuses.
 */
import { describe, expect, it } from "vitest";
import { Agent } from "../src/index.js";
import { memoryStore } from "../src/store/index.js";
import { scriptedModel } from "../src/testing/index.js";
import { errorOf, post } from "./support/http.js";
import { listen } from "./support/listen.js";

type Item = { type: string; role?: string; content?: unknown; encrypted_content?: string };

describe("POST /v1/responses/compact", () => {
  it("keeps the user messages, stands a summary for the rest, and takes it back as input", async () => {
    const model = scriptedModel([
      { text: "The user plans a trip to Lyon in May." },
      { text: "Lyon in May: pack light." },
    ]);
    const { baseURL } = await listen({ agents: { trip: new Agent({ model }) }, store: memoryStore() });
    const res = await post(`${baseURL}/responses/compact`, {
      model: "trip",
      input: [
        { type: "message", role: "user", content: "Plan a trip to Lyon." },
        { type: "message", role: "assistant", content: "When?" },
        { type: "message", role: "user", content: "In May." },
      ],
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { object: string; output: Item[]; usage: { total_tokens: number } };
    expect(body.object).toBe("response.compaction");
    expect(body.output.map((i) => [i.type, i.role])).toEqual([
      ["message", "user"],
      ["message", "user"],
      ["compaction", undefined],
    ]);
    // The summarizer read the whole conversation.
    expect(JSON.stringify(model.requests[0]?.messages)).toContain("assistant: When?");

    const next = await post(`${baseURL}/responses`, {
      model: "trip",
      input: [...body.output, { type: "message", role: "user", content: "What should I pack?" }],
    });
    expect(next.status).toBe(200);
    expect(JSON.stringify(model.requests[1]?.messages)).toContain(
      "[Summary of the earlier conversation: The user plans a trip to Lyon in May.]",
    );
  });

  it("refuses nothing to compact, and a compaction item of another provider", async () => {
    const { baseURL } = await listen({ agents: { a: new Agent({ model: scriptedModel([]) }) } });
    const empty = await post(`${baseURL}/responses/compact`, { model: "a", input: [] });
    expect(empty.status).toBe(400);
    expect((await errorOf(empty)).message).toMatch(/Nothing to compact/);
    const foreign = await post(`${baseURL}/responses`, {
      model: "a",
      input: [
        { type: "compaction", id: "cmp_1", encrypted_content: "gAAAA-opaque" },
        { type: "message", role: "user", content: "go on" },
      ],
    });
    expect(foreign.status).toBe(400);
    expect((await errorOf(foreign)).message).toMatch(/not made by this server/);
  });
});
