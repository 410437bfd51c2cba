/**
 * The context budget learns what a server adds to our count of a request (a chat template wrapped
 * around the messages and tool schemas) from the prompt tokens it reports, through the real loop,
 * the real adapter and the fake OpenAI server.
 */
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { countRequest } from "../../test/support/count-request.js";
import { Agent, defineTool } from "../index.js";
import { openAIChatModel } from "../models/openai-chat.js";
import { type FakeOpenAIServer, startFakeOpenAIServer } from "../testing/fake-openai-server.js";
import { keptFree, learnOverhead, newOverhead, noteCount } from "./overhead.js";
import { tokenCounterFor } from "./tokens.js";

let server: FakeOpenAIServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

const read = defineTool({
  name: "read",
  description: "Reads a page.",
  parameters: z.object({ page: z.number() }),
  // About 400 tokens a page.
  execute: ({ page }) => `page ${page}: ${"lorem ipsum dolor ".repeat(100)}`,
});

/**
 * A run of two `read` calls then an answer, the server reporting `overhead` more prompt tokens than
 * our count of each request; returns the requests the server received.
 */
async function runWithOverhead(overhead: number) {
  const counter = tokenCounterFor("m");
  server = await startFakeOpenAIServer({
    respond: (request, index) => {
      const ours = countRequest(
        {
          system: "",
          messages: (request.body.messages as { role: string; content: string }[]).map((m) => ({
            role: "user" as const,
            content: m.content ?? "",
          })),
          tools: [],
        },
        counter,
      );
      const usage = { inputTokens: ours + overhead, outputTokens: 10 };
      return index < 2
        ? { toolCalls: [{ name: "read", arguments: { page: index } }], usage }
        : { text: "done", usage };
    },
  });
  const agent = new Agent({
    model: openAIChatModel({ model: "m", baseURL: server.url, maxRetries: 0 }),
    tools: [read],
    maxContextTokens: 2000,
  });
  const result = await agent.run("summarise pages 0 and 1");
  expect(result.stopReason).toBe("final_answer");
  return server.requests.map((r) => JSON.stringify(r.body.messages));
}

describe("the context budget and the server's own overhead", () => {
  it("prunes the next requests to fit once the server reported more prompt tokens than we counted", async () => {
    // Our count of the third request (task, two calls, two pages) is about 900 tokens: under the
    // 1,700-token budget, but not once the server's 1,000 tokens of template are added.
    const plain = await runWithOverhead(0);
    expect(plain[2]).not.toContain("omitted to fit the context window");
    expect(plain[2]).toContain("page 0:");

    const wrapped = await runWithOverhead(1000);
    expect(wrapped[2]).toContain("earlier messages omitted to fit the context window");
    expect(wrapped[2]).not.toContain("page 0:");
    expect(wrapped[2]).toContain("page 1:");
  });
});

describe("the overhead learned by one run", () => {
  it("is kept free from the first request of the agent's next run (a chat's next turn)", async () => {
    const counter = tokenCounterFor("m");
    const overhead = 1000;
    server = await startFakeOpenAIServer({
      respond: (request, index) => {
        const messages = request.body.messages as { role: string; content: string | null }[];
        const ours = countRequest(
          {
            system: "",
            messages: messages.map((m) => ({ role: "user" as const, content: m.content ?? "" })),
            tools: [],
          },
          counter,
        );
        const usage = { inputTokens: ours + overhead, outputTokens: 10 };
        return index === 0
          ? { toolCalls: [{ name: "read", arguments: { page: 0 } }], usage }
          : { text: "done", usage };
      },
    });
    const agent = new Agent({
      model: openAIChatModel({ model: "m", baseURL: server.url, maxRetries: 0 }),
      tools: [read],
      maxContextTokens: 2000,
    });
    // The first turn (task, one page, answer) is about 500 tokens by our count: it fits even with the overhead.
    const first = await agent.run("summarise page 0");
    expect(first.stopReason).toBe("final_answer");
    // The second turn's history is about 1,000 tokens by our count: under the 1,700-token budget
    // with only the first requests' margin, over it with the server's 1,000 tokens the first turn showed.
    const long = `and now this: ${"sit amet consectetur ".repeat(120)}`;
    const second = await agent.run(long, { history: first.messages });
    expect(second.stopReason).toBe("final_answer");
    const sent = JSON.stringify(server.requests[2]?.body.messages);
    expect(sent).toContain("earlier messages omitted to fit the context window");
    expect(sent).not.toContain("page 0:");
    expect(sent).toContain("sit amet");
  });
});

describe("learnOverhead", () => {
  it("takes an exact count's difference as it is, and an upper bound's only to raise what is kept free", () => {
    const o = newOverhead();
    expect(keptFree(o, 50)).toBe(50);
    // Against an upper bound: below the margin teaches nothing, above it raises.
    noteCount(o, 1000, true);
    learnOverhead(o, 1020, 50);
    expect(keptFree(o, 50)).toBe(50);
    noteCount(o, 1000, true);
    learnOverhead(o, 1300, 50);
    expect(keptFree(o, 50)).toBe(300);
    // Against an exact count: the difference, even a smaller one; a server that counts less leaves none.
    noteCount(o, 1000, false);
    learnOverhead(o, 1120, 50);
    expect(keptFree(o, 50)).toBe(120);
    noteCount(o, 1000, false);
    learnOverhead(o, 900, 50);
    expect(keptFree(o, 50)).toBe(0);
    // Nothing reported (a provider without usage), or reported twice for one request: nothing learned.
    learnOverhead(o, 5000, 50);
    noteCount(o, 1000, false);
    learnOverhead(o, 0, 50);
    expect(keptFree(o, 50)).toBe(0);
  });
});
