import OpenAI from "openai";
import { afterEach, describe, expect, it } from "vitest";
import {
  type FakeOpenAIServer,
  type FakeResponder,
  startFakeOpenAIServer,
} from "../src/testing/fake-openai-server.js";
import { startServe } from "./support/serve-process.js";

/**
 * What a client of `agentloop serve` reads when the agent's model API refuses a request: the
 * client's own fault (a prompt too long for the context window) stays a 4xx with the provider's
 * code, on both endpoints, streamed or not; the server's own problems (its key) stay a 502 that
 * says nothing of the upstream.
 */

let upstream: FakeOpenAIServer | undefined;
afterEach(async () => {
  await upstream?.close();
  upstream = undefined;
});

const UPSTREAM_KEY = "sk-upstream-0123456789";

/** OpenAI's answer to a prompt longer than the context window. */
const OPENAI_OVERFLOW = {
  status: 400,
  body: JSON.stringify({
    error: {
      message:
        "This model's maximum context length is 8192 tokens. However, your messages resulted in 9100 tokens. Please reduce the length of the messages.",
      type: "invalid_request_error",
      param: "messages",
      code: "context_length_exceeded",
    },
  }),
};

/** llama.cpp server's answer to the same. */
const LLAMA_OVERFLOW = {
  status: 400,
  body: JSON.stringify({
    error: {
      code: 400,
      message: "request (9100 tokens) exceeds the available context size (8192 tokens), try increasing it",
      type: "exceed_context_size_error",
      n_prompt_tokens: 9100,
      n_ctx: 8192,
    },
  }),
};

async function serveWith(respond: FakeResponder) {
  upstream = await startFakeOpenAIServer({ respond });
  const serve = startServe({ OPENAI_BASE_URL: upstream.url, OPENAI_API_KEY: UPSTREAM_KEY });
  const url = await serve.url();
  return { serve, client: new OpenAI({ baseURL: `${url}/v1`, apiKey: "none", maxRetries: 0 }) };
}

/** The `APIError` a call rejects with. */
async function rejection(call: Promise<unknown>): Promise<InstanceType<typeof OpenAI.APIError>> {
  const error = await call.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(OpenAI.APIError);
  return error as InstanceType<typeof OpenAI.APIError>;
}

/** Every way to ask: chat completions and responses, streamed and not (streams read to their end). */
function asks(client: OpenAI) {
  const messages = [{ role: "user" as const, content: "a long prompt" }];
  return {
    chat: () => client.chat.completions.create({ model: "gpt-4o-mini", messages }),
    chatStream: async () => {
      for await (const _ of await client.chat.completions.create({
        model: "gpt-4o-mini",
        messages,
        stream: true,
      }));
    },
    responses: () => client.responses.create({ model: "gpt-4o-mini", input: "a long prompt" }),
    responsesStream: async () => {
      for await (const _ of await client.responses.create({
        model: "gpt-4o-mini",
        input: "a long prompt",
        stream: true,
      }));
    },
  };
}

describe("agentloop serve, when the model API refuses the request", () => {
  it("answers a prompt longer than the context window with a 400 context_length_exceeded, not a 502", async () => {
    for (const overflow of [OPENAI_OVERFLOW, LLAMA_OVERFLOW]) {
      const { client, serve } = await serveWith(() => overflow);
      for (const [name, ask] of Object.entries(asks(client))) {
        const error = await rejection(ask());
        expect(error.status, name).toBe(400);
        expect(error.code, name).toBe("context_length_exceeded");
        expect(error.type, name).toBe("invalid_request_error");
        expect(error.message, name).toMatch(/context/);
        expect(error.message, name).not.toContain(String(upstream?.url));
        expect(error.headers?.get("x-should-retry"), name).toBe("false");
      }
      // Each request once: a 400 is not retried, upstream or here.
      expect(upstream?.requests).toHaveLength(4);
      serve.child.kill("SIGKILL");
      await upstream?.close();
    }
  });

  it("keeps another 4xx of the model API (422) its status, and says the model API's 401 is the server's, as a 502", async () => {
    const invalid = { status: 422, body: JSON.stringify({ error: { message: "temperature: too high" } }) };
    const unauthorized = {
      status: 401,
      body: JSON.stringify({
        error: { message: "Incorrect API key provided: sk-up***6789.", code: "invalid_api_key" },
      }),
    };
    const { client } = await serveWith([invalid, invalid, unauthorized, unauthorized]);
    const { chat, chatStream } = asks(client);
    for (const ask of [chat, chatStream]) {
      const error = await rejection(ask());
      expect(error.status).toBe(422);
      expect(error.code).toBe("http_422");
      expect(error.message).toContain("temperature: too high");
    }
    for (const ask of [chat, chatStream]) {
      const error = await rejection(ask());
      expect(error.status).toBe(502);
      expect(error.code).toBe("model_error");
      expect(error.message).toMatch(/refused the server's credentials \(HTTP 401\).*operator/);
      expect(error.message).not.toContain("sk-up");
    }
  });

  it("answers the model API's rate limit (after its retries) with a 503", async () => {
    const { client } = await serveWith(() => ({ status: 429, headers: { "retry-after-ms": "1" } }));
    const error = await rejection(asks(client).chat());
    expect(error.status).toBe(503);
    expect(error.code).toBe("http_429");
    expect(error.type).toBe("server_error");
    expect(upstream?.requests).toHaveLength(4);
  });

  it("streams the provider's code in the error event when the overflow comes after output was sent", async () => {
    const { client } = await serveWith([
      { text: "Let me compute.", toolCalls: [{ name: "calculator", arguments: { expression: "2+2" } }] },
      OPENAI_OVERFLOW,
    ]);
    const stream = await client.chat.completions.create({
      model: "gpt-4o-mini",
      messages: [{ role: "user", content: "2+2?" }],
      stream: true,
    });
    const events: unknown[] = [];
    for await (const chunk of stream) events.push((chunk as { agentloop?: unknown }).agentloop);
    expect(events.at(-1)).toMatchObject({ type: "error", code: "context_length_exceeded" });
  });
});
