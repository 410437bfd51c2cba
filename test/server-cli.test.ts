import { afterEach, describe, expect, it } from "vitest";
import { type FakeOpenAIServer, type FakeResponse, startFakeOpenAIServer } from "../src/testing/index.js";
import { startServe } from "./support/serve-process.js";

let upstream: FakeOpenAIServer | undefined;
afterEach(async () => {
  await upstream?.close();
});

const UPSTREAM_KEY = "sk-upstream-0123456789";

const chat = (url: string, body: object) =>
  fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ messages: [{ role: "user", content: "hi" }], ...body }),
  });

/** The `data:` chunks of an SSE body, parsed ([DONE] left out). */
const chunksOf = (text: string) =>
  [...text.matchAll(/^data: (\{.*\})$/gm)].map(
    (m) => JSON.parse(m[1] as string) as { choices: { delta: { content?: string } }[]; agentloop?: object },
  );

describe("agentloop serve, shutting down", () => {
  it("on SIGTERM refuses new requests with 503 and completes every request in flight, streaming or not", async () => {
    const held: ((reply: FakeResponse) => void)[] = [];
    upstream = await startFakeOpenAIServer({
      respond: () => new Promise<FakeResponse>((resolve) => held.push(resolve)),
    });
    const serve = startServe({ OPENAI_BASE_URL: upstream.url, OPENAI_API_KEY: UPSTREAM_KEY });
    const url = await serve.url();
    const streaming = chat(url, { stream: true });
    const plain = chat(url, {});
    while (held.length < 2) await new Promise((resolve) => setTimeout(resolve, 5));
    serve.child.kill("SIGTERM");
    await serve.waitFor(/shutting down/);
    const late = await chat(url, {});
    expect(late.status).toBe(503);
    expect(((await late.json()) as { error: { code: string } }).error.code).toBe("shutting_down");
    for (const release of held) release({ text: "Finished after SIGTERM." });

    const text = await (await streaming).text();
    const chunks = chunksOf(text);
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? "").join("")).toBe("Finished after SIGTERM.");
    expect(chunks.at(-1)).toMatchObject({
      choices: [{ finish_reason: "stop" }],
      agentloop: { type: "turn_complete", stopReason: "final_answer" },
    });
    expect(text.endsWith("data: [DONE]\n\n")).toBe(true);
    const completion = (await (await plain).json()) as { choices: { message: { content: string } }[] };
    expect(completion.choices[0]?.message.content).toBe("Finished after SIGTERM.");
    expect(await serve.exited).toBe(0);
    expect(serve.stderr()).not.toContain(UPSTREAM_KEY);
  });

  it("cuts the requests still running at --drain-timeout: a stream ends with an error chunk and [DONE]", async () => {
    let reached = 0;
    upstream = await startFakeOpenAIServer({
      respond: () => {
        reached++;
        return { stall: true, afterText: "Partial" };
      },
    });
    const serve = startServe({ OPENAI_BASE_URL: upstream.url, OPENAI_API_KEY: UPSTREAM_KEY }, [
      "--drain-timeout",
      "0.2",
    ]);
    const url = await serve.url();
    const streaming = await chat(url, { stream: true });
    const plain = chat(url, {});
    while (reached < 2) await new Promise((resolve) => setTimeout(resolve, 5));
    serve.child.kill("SIGTERM");

    const text = await streaming.text();
    const chunks = chunksOf(text);
    expect(chunks.at(-2)?.agentloop).toMatchObject({ type: "turn_complete", stopReason: "aborted" });
    expect(chunks.at(-1)).toMatchObject({
      choices: [{ delta: {}, finish_reason: "stop" }],
      agentloop: { type: "error", code: "shutting_down" },
    });
    expect(text.endsWith("data: [DONE]\n\n")).toBe(true);
    const cut = await plain;
    expect(cut.status).toBe(503);
    expect(((await cut.json()) as { error: { code: string } }).error.code).toBe("shutting_down");
    expect(await serve.exited).toBe(0);
  });

  it("answers models named like Object.prototype members with 404 and leaks no request, so SIGTERM exits at once", async () => {
    upstream = await startFakeOpenAIServer({ respond: () => ({ text: "unused" }) });
    const serve = startServe({ OPENAI_BASE_URL: upstream.url, OPENAI_API_KEY: UPSTREAM_KEY });
    const url = await serve.url();
    for (const model of ["constructor", "__proto__", "toString"]) {
      for (const stream of [false, true]) {
        const res = await chat(url, { model, stream });
        expect(res.status, `${model}, stream ${stream}`).toBe(404);
        expect(await res.json()).toMatchObject({ error: { code: "model_not_found", param: "model" } });
      }
    }
    expect(await (await fetch(`${url}/metrics`)).text()).toContain("agentloop_requests_in_flight 0");
    expect(upstream.requests).toHaveLength(0);
    serve.child.kill("SIGTERM");
    // Well within the 10 s drain deadline (this test's timeout): nothing was left in flight.
    expect(await serve.exited).toBe(0);
    expect(serve.stderr()).toContain("agentloop: shutting down");
  }, 8_000);
});
