// The server's chat completions with OpenAI `image_url` parts (through the official client), their
// bad input (400, 413), and an agent with an output schema answering as a model.
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { Agent } from "../src/index.js";
import { memoryStore } from "../src/store/index.js";
import { scriptedModel } from "../src/testing/index.js";
import { listen } from "./support/listen.js";

const PNG = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), Buffer.alloc(200)]);
const PNG_URL = `data:image/png;base64,${PNG.toString("base64")}`;

const errorOf = async (res: Response) =>
  ((await res.json()) as { error: { message: string; code: string | null; param: string | null } }).error;

const post = (baseURL: string, body: unknown) =>
  fetch(`${baseURL}/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });

describe("chat completions with images", () => {
  it("hands image_url parts of the input and of the history to the agent's model", async () => {
    const model = scriptedModel([{ text: "A black square." }]);
    const { client } = await listen({ agents: { eye: new Agent({ model }) } });
    const completion = await client.chat.completions.create({
      model: "eye",
      messages: [
        { role: "user", content: [{ type: "image_url", image_url: { url: "https://example.com/a.png" } }] },
        { role: "assistant", content: "A cat." },
        {
          role: "user",
          content: [
            { type: "text", text: "And this one?" },
            { type: "image_url", image_url: { url: PNG_URL, detail: "low" } },
          ],
        },
      ],
    });
    expect(completion.choices[0]?.message.content).toBe("A black square.");
    expect(model.requests[0]?.messages).toEqual([
      { role: "user", content: "", media: [{ type: "image", url: "https://example.com/a.png" }] },
      { role: "assistant", content: "A cat." },
      { role: "user", content: "And this one?", media: [{ type: "image", url: PNG_URL }] },
    ]);
  });

  it("answers 400 for an image that is not one and 413 for one over the agent's limit", async () => {
    const agent = new Agent({ model: scriptedModel([]), maxImageBytes: 100 });
    const { baseURL } = await listen({ agents: { eye: agent } });
    const ask = (url: string) =>
      post(baseURL, { messages: [{ role: "user", content: [{ type: "image_url", image_url: { url } }] }] });
    const notImage = await ask(`data:image/png;base64,${Buffer.from("%PDF-1.7").toString("base64")}`);
    expect(notImage.status).toBe(400);
    expect(await notImage.json()).toMatchObject({
      error: {
        param: "messages.0.content.0",
        message: expect.stringMatching(/^messages\.0\.content\.0 is not a PNG/),
      },
    });
    const notUrl = await ask("cat.png");
    expect(notUrl.status).toBe(400);
    expect((await errorOf(notUrl)).message).toBe(
      "messages.0.content.0: image_url.url must be an http(s) URL or a data: URL (data:image/png;base64,...).",
    );
    const tooLarge = await ask(PNG_URL);
    expect(tooLarge.status).toBe(413);
    expect(await errorOf(tooLarge)).toMatchObject({
      code: "image_too_large",
      message:
        "Image 1 is 208 bytes, over the 100 bytes limit for an image: send a smaller or downscaled image.",
    });
  });
});

describe("an image over the agent's limit, on both endpoints", () => {
  it("is a 413 image_too_large on chat completions and on /v1/responses, and the named session is free again", async () => {
    const agent = new Agent({ model: scriptedModel([]), maxImageBytes: 100 });
    const { baseURL } = await listen({ agents: { eye: agent }, store: memoryStore() });
    const bodies = {
      "chat/completions": {
        messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: PNG_URL } }] }],
      },
      responses: {
        input: [{ role: "user", content: [{ type: "input_image", image_url: PNG_URL, detail: "auto" }] }],
      },
    };
    for (const [path, body] of Object.entries(bodies)) {
      for (let i = 0; i < 2; i++) {
        const res = await fetch(`${baseURL}/${path}`, {
          method: "POST",
          headers: { "content-type": "application/json", "x-agentloop-session": "s1" },
          body: JSON.stringify(body),
        });
        expect({ path, status: res.status }).toEqual({ path, status: 413 });
        expect(await errorOf(res)).toEqual({
          type: "invalid_request_error",
          code: "image_too_large",
          param: null,
          message:
            "Image 1 is 208 bytes, over the 100 bytes limit for an image: send a smaller or downscaled image.",
        });
      }
    }
  });
});

describe("an agent with an output schema, served", () => {
  it("answers with the validated JSON once, streaming or not", async () => {
    const answer = '{"city":"Paris","celsius":21}'; // the model's `{ "city": "Paris", ... }`, as result.text
    const agent = new Agent({
      model: scriptedModel(() => ({ text: '{ "city": "Paris", "celsius": 21 }' })),
      outputSchema: z.object({ city: z.string(), celsius: z.number() }),
    });
    const { client } = await listen({ agents: { weather: agent } });
    const request = { model: "weather", messages: [{ role: "user" as const, content: "Paris?" }] };
    const completion = await client.chat.completions.create(request);
    expect(completion.choices[0]?.message.content).toBe(answer);
    let streamed = "";
    for await (const chunk of await client.chat.completions.create({ ...request, stream: true })) {
      streamed += chunk.choices[0]?.delta.content ?? "";
    }
    expect(streamed).toBe(answer);
  });
});

describe("responses with images", () => {
  it("hands input_image parts to the agent's model, and refuses a file_id image with a 400 naming the part", async () => {
    const model = scriptedModel([{ text: "A black square." }]);
    const { client, baseURL } = await listen({ agents: { eye: new Agent({ model }) } });
    const response = await client.responses.create({
      model: "eye",
      input: [
        {
          role: "user",
          content: [
            { type: "input_text", text: "What is this?" },
            { type: "input_image", image_url: PNG_URL, detail: "auto" },
          ],
        },
      ],
    });
    expect(response.output_text).toBe("A black square.");
    expect(model.requests[0]?.messages).toEqual([
      { role: "user", content: "What is this?", media: [{ type: "image", url: PNG_URL }] },
    ]);
    const refused = await fetch(`${baseURL}/responses`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        input: [{ role: "user", content: [{ type: "input_image", file_id: "file-123", detail: "auto" }] }],
      }),
    });
    expect(refused.status).toBe(400);
    expect(await errorOf(refused)).toMatchObject({
      param: "input.0.content.0",
      message: expect.stringContaining("file_id is not supported here"),
    });
  });
});
