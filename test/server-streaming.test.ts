import { describe, expect, it } from "vitest";
import { z } from "zod";
import { Agent, defineTool, type Model, type ModelEvent } from "../src/index.js";
import { scriptedModel } from "../src/testing/index.js";
import { listen } from "./support/listen.js";

/** A promise the test resolves. */
function gate() {
  let open: () => void = () => {};
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { opened, open: () => open() };
}

/** Reads an SSE body as it arrives: `until(pattern)` resolves once the text so far matches. */
function incremental(res: Response) {
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  const decoder = new TextDecoder();
  let text = "";
  return {
    text: () => text,
    async until(pattern: RegExp): Promise<string> {
      while (!pattern.test(text)) {
        const { value, done } = await reader.read();
        if (done) throw new Error(`stream ended before ${pattern}: ${text}`);
        text += decoder.decode(value, { stream: true });
      }
      return text;
    },
  };
}

const post = (baseURL: string, body: object) =>
  fetch(`${baseURL}/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ messages: [{ role: "user", content: "go" }], stream: true, ...body }),
  });

const done = (content: string): ModelEvent => ({
  type: "done",
  message: { content, toolCalls: [], finishReason: "stop", usage: { inputTokens: 1, outputTokens: 1 } },
});

describe("streaming without holding anything back", () => {
  it("sends the headers and the role chunk while the model has not answered yet, then each delta as it comes", async () => {
    const first = gate();
    const second = gate();
    const model: Model = {
      id: "slow",
      async *stream() {
        await first.opened;
        yield { type: "text_delta", text: "Hello" };
        await second.opened;
        yield { type: "text_delta", text: " world" };
        yield done("Hello world");
      },
    };
    const { baseURL } = await listen({ agents: { slow: new Agent({ model }) }, streamHoldMs: 20 });
    const res = await post(baseURL, {});
    expect(res.status).toBe(200);
    const body = incremental(res);
    await body.until(/"delta":\{"role":"assistant","content":""\}/);
    expect(body.text()).not.toContain("Hello");
    first.open();
    await body.until(/"content":"Hello"/);
    expect(body.text()).not.toContain(" world");
    second.open();
    const text = await body.until(/data: \[DONE\]\n\n$/);
    expect(text).toContain('"content":" world"');
  });

  it("shows a tool call at once and sends keep-alive comments while the tool runs", async () => {
    const release = gate();
    let running = false;
    const slow = defineTool({
      name: "slow",
      description: "Waits for the test.",
      parameters: z.object({}),
      execute: async () => {
        running = true;
        await release.opened;
        running = false;
        return "done";
      },
    });
    const agent = new Agent({
      model: scriptedModel([{ toolCalls: [{ name: "slow" }] }, { text: "All done." }]),
      tools: [slow],
    });
    const { baseURL } = await listen({ agents: { a: agent }, keepAliveMs: 20 });
    const body = incremental(await post(baseURL, {}));
    await body.until(/"type":"tool_call"/);
    expect(running).toBe(true);
    await body.until(/\n: keep-alive\n\n/);
    expect(running).toBe(true);
    expect(body.text()).not.toContain("tool_result");
    release.open();
    const text = await body.until(/data: \[DONE\]\n\n$/);
    const content = [...text.matchAll(/"delta":\{"content":"([^"]*)"\}/g)].map((m) => m[1]).join("");
    expect(content).toBe("All done.");
    // Standard SSE parsers skip the comments: the official client's view is unchanged.
    expect(text.replace(/: keep-alive\n\n/g, "")).toMatch(/^(data: .+\n\n)+$/);
  });

  it("still answers 502 when the run fails within the hold, and streams the error when it fails later", async () => {
    const late = gate();
    const failing = (wait?: Promise<void>): Model => ({
      id: "failing",
      async *stream() {
        await wait;
        yield { type: "error", error: { code: "http_500", message: "Model API error (HTTP 500): boom" } };
      },
    });
    const { baseURL } = await listen({
      agents: { early: new Agent({ model: failing() }), late: new Agent({ model: failing(late.opened) }) },
      streamHoldMs: 20,
    });
    const early = await post(baseURL, { model: "early" });
    expect(early.status).toBe(502);
    expect(await early.json()).toMatchObject({ error: { code: "model_error", type: "upstream_error" } });

    const res = await post(baseURL, { model: "late" });
    expect(res.status).toBe(200);
    const body = incremental(res);
    await body.until(/"role":"assistant"/);
    late.open();
    const text = await body.until(/data: \[DONE\]\n\n$/);
    const chunks = [...text.matchAll(/^data: (\{.*\})$/gm)].map((m) => JSON.parse(m[1] as string));
    expect(chunks.at(-2)?.agentloop).toMatchObject({ type: "turn_complete", stopReason: "model_error" });
    expect(chunks.at(-1)?.agentloop).toMatchObject({ type: "error", code: "http_500" });
  });
});
