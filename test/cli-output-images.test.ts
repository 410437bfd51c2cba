// `agentloop run --output-schema <file>` and `--image <path|url>` through the built CLI against the
// fake OpenAI server: the JSON on stdout, the request bytes, the bad input, and images never printed.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import {
  type FakeOpenAIServer,
  type FakeResponder,
  startFakeOpenAIServer,
} from "../src/testing/fake-openai-server.js";
import { runCli } from "./helpers.js";

const root = mkdtempSync(join(tmpdir(), "agentloop-cli-output-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

let server: FakeOpenAIServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

const WEATHER = {
  type: "object",
  properties: { city: { type: "string" }, celsius: { type: "number" } },
  required: ["city", "celsius"],
};
const PNG = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), Buffer.alloc(200)]);

/** A fresh folder with `weather.json`, `photo.png` and `notes.txt`, and a fake model answering with `respond`. */
async function workspace(respond: FakeResponder) {
  const dir = mkdtempSync(join(root, "w-"));
  writeFileSync(join(dir, "weather.json"), JSON.stringify(WEATHER));
  writeFileSync(join(dir, "photo.png"), PNG);
  writeFileSync(join(dir, "notes.txt"), "not an image");
  server = await startFakeOpenAIServer({ respond });
  const env = { OPENAI_BASE_URL: server.url, OPENAI_API_KEY: "sk-test-1234" };
  return { dir, cli: (args: string[]) => runCli(args, { cwd: dir, env }) };
}

describe("agentloop run --output-schema", () => {
  it("prints the answer as JSON on stdout, the schema sent as response_format", async () => {
    const { cli } = await workspace([{ text: '{\n  "city": "Paris",\n  "celsius": 21\n}' }]);
    const run = await cli(["run", "--output-schema", "weather.json", "Weather in Paris?"]);
    expect(run).toMatchObject({ code: 0, stdout: '{"city":"Paris","celsius":21}\n', stderr: "" });
    expect(server?.requests[0]?.body.response_format).toMatchObject({
      type: "json_schema",
      json_schema: { name: "final_output", strict: true },
    });
  });

  it("ends with circuit_breaker (exit 4) and one line when the model ignores the schema", async () => {
    const { cli } = await workspace([{ text: "Sunny." }, { text: "Sunny!" }, { text: "Sunny, 21 °C." }]);
    const run = await cli(["run", "--output-schema", "weather.json", "Weather in Paris?"]);
    expect(run.code).toBe(4);
    expect(run.stdout).toBe(""); // with a schema, stdout carries only valid JSON
    expect(run.stderr).toBe(
      "agentloop: circuit_breaker: The same error repeated 3 times in a row: the final answer does not match the output schema (the answer is not JSON)\n",
    );
  });

  it("refuses a schema file that is missing, not JSON or not an object schema (exit 2, one line)", async () => {
    const { dir, cli } = await workspace([]);
    writeFileSync(join(dir, "list.json"), JSON.stringify({ type: "array", items: { type: "string" } }));
    writeFileSync(join(dir, "broken.json"), "{ type: object");
    const cases: [string, RegExp][] = [
      [
        "list.json",
        /^agentloop: --output-schema list\.json must describe a JSON object \(type "object"\), got type "array": wrap/,
      ],
      ["broken.json", /^agentloop: --output-schema broken\.json is not valid JSON: /],
      [
        "missing.json",
        /^agentloop: --output-schema missing\.json: cannot read it \(ENOENT\): give the path of a JSON Schema file\.\n$/,
      ],
    ];
    for (const [file, message] of cases) {
      const run = await cli(["run", "--output-schema", file, "Weather?"]);
      expect(run.code, file).toBe(2);
      expect(run.stderr, file).toMatch(message);
      expect(run.stderr.trim().split("\n"), file).toHaveLength(1);
    }
    expect(server?.requests).toHaveLength(0);
  });

  it("validates the answer of a run continued with --approve without the flag", async () => {
    const { dir, cli } = await workspace([
      { toolCalls: [{ name: "calculator", arguments: { expression: "20 + 1" } }] },
      { text: '{"city": "Paris", "celsius": "21"}' },
      { text: '{"city": "Paris", "celsius": 21}' },
    ]);
    writeFileSync(join(dir, "agentloop.json"), JSON.stringify({ approval: { require: ["calculator"] } }));
    const first = await cli(["run", "--session", "s", "--output-schema", "weather.json", "Weather?"]);
    expect(first.code).toBe(8);
    const second = await cli(["run", "--session", "s", "--approve", "all"]);
    expect(second).toMatchObject({ code: 0, stdout: '{"city":"Paris","celsius":21}\n' });
    expect(server?.requests[1]?.body.response_format?.json_schema.name).toBe("final_output");
    const correction = server?.requests[2]?.body.messages.at(-1);
    expect(correction.content).toMatch(
      /^Your final answer does not match the required output schema: celsius: /,
    );
  });
});

describe("agentloop run --image", () => {
  it("sends files inline and URLs as given, and never prints them", async () => {
    const { cli } = await workspace([{ text: "A black square and a cat." }]);
    const run = await cli([
      "run",
      "--json",
      "--verbose",
      "--session",
      "pics",
      "--image",
      "photo.png",
      "--image",
      "https://example.com/cat.png",
      "What is in these?",
    ]);
    expect(run.code).toBe(0);
    expect(server?.requests[0]?.body.messages.at(-1)).toEqual({
      role: "user",
      content: [
        { type: "text", text: "What is in these?" },
        { type: "image_url", image_url: { url: `data:image/png;base64,${PNG.toString("base64")}` } },
        { type: "image_url", image_url: { url: "https://example.com/cat.png" } },
      ],
    });
    const base64 = PNG.toString("base64").slice(0, 40);
    expect(run.stdout + run.stderr).not.toContain(base64);
    const show = await cli(["sessions", "show", "pics"]);
    expect(show.stdout).toContain(
      "user: What is in these? [image: image/png, 208 bytes] [image: https://example.com/…]",
    );
    expect(show.stdout).not.toContain(base64);
    // As JSON: the same messages, each image's url its placeholder, unless --include-media asks for the data.
    const placeholders = JSON.parse((await cli(["sessions", "show", "pics", "--json"])).stdout);
    expect(placeholders[0]).toEqual({
      role: "user",
      content: "What is in these?",
      media: [
        { type: "image", url: "[image: image/png, 208 bytes]" },
        { type: "image", url: "[image: https://example.com/…]" },
      ],
    });
    const raw = JSON.parse((await cli(["sessions", "show", "pics", "--json", "--include-media"])).stdout);
    expect(raw[0].media).toEqual([
      { type: "image", url: `data:image/png;base64,${PNG.toString("base64")}` },
      { type: "image", url: "https://example.com/cat.png" },
    ]);
    expect(raw.slice(1)).toEqual(placeholders.slice(1));
  });

  it("refuses a file that is not an image, a missing file, and --image on other commands (exit 2, one line)", async () => {
    const { cli } = await workspace([]);
    const notImage = await cli(["run", "--image", "notes.txt", "What is this?"]);
    expect(notImage).toMatchObject({
      code: 2,
      stderr:
        "agentloop: --image notes.txt is not a PNG, JPEG, GIF or WebP image: send a PNG, JPEG, GIF or WebP image, as bytes, base64, a data: URL or an http(s) URL.\n",
    });
    const missing = await cli(["run", "--image", "gone.png", "What is this?"]);
    expect(missing).toMatchObject({
      code: 2,
      stderr:
        "agentloop: --image gone.png: cannot read it (ENOENT): give the path of an image file or an http(s) URL.\n",
    });
    const chat = await cli(["chat", "--image", "photo.png"]);
    expect(chat).toMatchObject({
      code: 2,
      stderr: "agentloop: --image goes with a prompt: use it with agentloop run, not chat.\n",
    });
    expect(server?.requests).toHaveLength(0);
  });
});
