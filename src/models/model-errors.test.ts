/**
 * The shared error classification and retry policy, through both real adapters against the fake
 * servers: each provider's context overflow is one code, a failure that will repeat is not
 * retried, and a transient error event inside a stream is retried like its HTTP status.
 */
import { describe, expect, it } from "vitest";
import { collect, done, errorOf, fakeServerPerTest } from "../../test/support/model-harness.js";
import { startFakeAnthropicServer } from "../testing/fake-anthropic-server.js";
import { startFakeOpenAIServer } from "../testing/fake-openai-server.js";
import { startFakeResponsesServer } from "../testing/fake-responses-server.js";
import { anthropicModel } from "./anthropic.js";
import { isContextOverflow } from "./model-errors.js";
import { openAIChatModel } from "./openai-chat.js";
import { openAIResponsesModel } from "./openai-responses.js";

const openai = fakeServerPerTest(startFakeOpenAIServer);
const anthropic = fakeServerPerTest(startFakeAnthropicServer);
const responses = fakeServerPerTest(startFakeResponsesServer);
const chat = (baseURL: string, maxRetries = 0) => openAIChatModel({ model: "m", baseURL, maxRetries });
const claude = (baseURL: string, maxRetries = 0) => anthropicModel({ model: "c", baseURL, maxRetries });

const json = (status: number, body: object) => ({ status, body: JSON.stringify(body) });

describe("a prompt longer than the context window, as each provider says it", () => {
  const overflows = {
    openai: json(400, {
      error: {
        message:
          "This model's maximum context length is 128000 tokens. However, your messages resulted in 130012 tokens. Please reduce the length of the messages.",
        type: "invalid_request_error",
        param: "messages",
        code: "context_length_exceeded",
      },
    }),
    "llama.cpp": json(400, {
      error: {
        code: 400,
        message: "request (2176 tokens) exceeds the available context size (2048 tokens), try increasing it",
        type: "exceed_context_size_error",
        n_prompt_tokens: 2176,
        n_ctx: 2048,
      },
    }),
    vLLM: json(400, {
      object: "error",
      message:
        "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.",
      type: "BadRequestError",
      param: null,
      code: 400,
    }),
    "vLLM v1": json(400, {
      error: {
        message:
          "The decoder prompt (length 5000) is longer than the maximum model length of 4096. Make sure that `max_model_len` is no smaller than the number of text tokens.",
        type: "BadRequestError",
        code: 400,
      },
    }),
    Ollama: json(400, {
      error: { message: "the input length exceeds the context length", type: "api_error" },
    }),
  };

  for (const [provider, answer] of Object.entries(overflows)) {
    it(`${provider} (Chat Completions): context_length_exceeded, status 400`, async () => {
      const s = await openai([answer]);
      const error = errorOf(await collect(chat(s.url, 3)));
      expect(error).toMatchObject({ code: "context_length_exceeded", status: 400 });
      expect(error.message).toMatch(/^The prompt exceeds the model's context window \(HTTP 400\): /);
      expect(isContextOverflow(error)).toBe(true);
      expect(s.requests).toHaveLength(1);
    });
  }

  it("Anthropic's 'prompt is too long': context_length_exceeded, status 400", async () => {
    const s = await anthropic([
      json(400, {
        type: "error",
        error: {
          type: "invalid_request_error",
          message: "prompt is too long: 208310 tokens > 200000 maximum",
        },
      }),
    ]);
    const error = errorOf(await collect(claude(s.url, 3)));
    expect(error).toMatchObject({ code: "context_length_exceeded", status: 400 });
    expect(error.message).toContain("prompt is too long: 208310 tokens > 200000 maximum");
    expect(s.requests).toHaveLength(1);
  });

  it("a failed response (Responses API) whose code is context_length_exceeded", async () => {
    const error = {
      code: "context_length_exceeded",
      message: "Your input exceeds the context window of this model.",
    };
    const s = await responses([{ end: "failed", error }]);
    const events = await collect(openAIResponsesModel({ model: "m", baseURL: s.url, maxRetries: 3 }));
    expect(errorOf(events)).toEqual({
      code: "context_length_exceeded",
      message:
        "The prompt exceeds the model's context window: Your input exceeds the context window of this model. (context_length_exceeded)",
    });
    expect(s.requests).toHaveLength(1);
  });

  it("another 400 stays http_400", async () => {
    const s = await openai([json(400, { error: { message: "temperature: must be at most 2" } })]);
    const error = errorOf(await collect(chat(s.url)));
    expect(error.code).toBe("http_400");
    expect(isContextOverflow(error)).toBe(false);
  });
});

describe("retries: one policy for HTTP errors and error events inside a stream", () => {
  it("does not retry a 500 that will repeat (llama.cpp without --jinja, a template that fails to parse)", async () => {
    const jinja = json(500, {
      error: { code: 500, message: "tools param requires --jinja flag", type: "server_error" },
    });
    const parse = json(500, {
      error: {
        code: 500,
        message: "Failed to parse messages: Expected 'content' to be a string",
        type: "server_error",
      },
    });
    for (const answer of [jinja, parse]) {
      const s = await openai(() => answer);
      const error = errorOf(await collect(chat(s.url, 3)));
      expect(error.code).toBe("http_500");
      expect(error.message).toContain("not retried: the server answers this request the same way every time");
      expect(s.requests).toHaveLength(1);
    }
    // Through the Anthropic client too.
    const s = await anthropic(() =>
      json(500, { type: "error", error: { type: "api_error", message: "Failed to parse input at pos 12" } }),
    );
    expect(errorOf(await collect(claude(s.url, 3))).code).toBe("http_500");
    expect(s.requests).toHaveLength(1);
  });

  it("still retries another 500", async () => {
    const s = await openai([{ status: 500, headers: { "retry-after-ms": "1" } }, { text: "ok" }]);
    expect(done(await collect(chat(s.url, 3))).content).toBe("ok");
    expect(s.requests).toHaveLength(2);
  });

  it("retries a transient error event that arrives before any delta (OpenAI server_error, Anthropic overloaded_error)", async () => {
    const o = await openai([
      {
        raw: 'data: {"error":{"message":"The server had an error while processing your request.","type":"server_error"}}\n\n',
      },
      { text: "ok" },
    ]);
    expect(done(await collect(chat(o.url, 3))).content).toBe("ok");
    expect(o.requests).toHaveLength(2);

    // llama.cpp's server while it loads the model (the type it gives its 503).
    const loading = await openai([
      { raw: 'data: {"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}\n\n' },
      { text: "ok" },
    ]);
    expect(done(await collect(chat(loading.url, 3))).content).toBe("ok");
    expect(loading.requests).toHaveLength(2);

    const a = await anthropic([
      {
        raw: 'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n',
      },
      { text: "ok" },
    ]);
    expect(done(await collect(claude(a.url, 3))).content).toBe("ok");
    expect(a.requests).toHaveLength(2);

    const r = await responses([
      { end: "failed", error: { code: "server_error", message: "The model had an error." } },
      { text: "ok" },
    ]);
    expect(
      done(await collect(openAIResponsesModel({ model: "m", baseURL: r.url, maxRetries: 3 }))).content,
    ).toBe("ok");
    expect(r.requests).toHaveLength(2);
  });

  it("does not retry an error event that will repeat, nor one after deltas were yielded, nor beyond maxRetries", async () => {
    const repeat = await openai(() => ({
      raw: 'data: {"error":{"code":500,"message":"tools param requires --jinja flag","type":"server_error"}}\n\n',
    }));
    expect(errorOf(await collect(chat(repeat.url, 3))).code).toBe("provider_error");
    expect(repeat.requests).toHaveLength(1);

    const late = await openai(() => ({
      raw: `data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: "Hel" } }] })}\n\ndata: {"error":{"message":"boom","type":"server_error"}}\n\n`,
    }));
    const events = await collect(chat(late.url, 3));
    expect(errorOf(events).code).toBe("provider_error");
    expect(late.requests).toHaveLength(1);

    const always = await anthropic(() => ({
      raw: 'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n',
    }));
    expect(errorOf(await collect(claude(always.url, 1)))).toEqual({
      code: "provider_error",
      message: "Model API error: Overloaded (overloaded_error)",
    });
    expect(always.requests).toHaveLength(2);
  });
});
