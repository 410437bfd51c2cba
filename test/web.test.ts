import { existsSync, mkdirSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import { type Browser, chromium } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { Agent, defineTool, type Model, type ModelEvent } from "../src/index.js";
import { createApp } from "../src/server/index.js";
import { builtinTools } from "../src/tools/builtin/index.js";

const CHROMIUM = "/usr/bin/chromium";
const ARTIFACTS = new URL("../test-artifacts/", import.meta.url);
const API_KEY = "web-test-key";

if (!existsSync(CHROMIUM)) {
  console.warn(
    `web chat tests skipped: ${CHROMIUM} is missing (install it with: apt-get install -y chromium)`,
  );
}

/** A gate the test opens: the model or a tool waits on it, so the page can be seen mid-run. */
function gate() {
  let open: () => void = () => {};
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { opened, open: () => open() };
}

/**
 * The model of the test: a question gets narration and a calculator call, then (once
 * `answerGate` opens) the answer in two parts with `midAnswer` between them; a follow-up
 * gets the number of messages it saw, proving the page keeps the conversation.
 */
function webModel(gates: { midAnswer: ReturnType<typeof gate> }): Model {
  const done = (
    content: string,
    toolCalls: { id: string; name: string; arguments: string }[] = [],
  ): ModelEvent => ({
    type: "done",
    message: {
      content,
      toolCalls,
      finishReason: toolCalls.length ? "tool_calls" : "stop",
      usage: { inputTokens: 7, outputTokens: 5 },
    },
  });
  return {
    id: "web",
    async *stream({ messages }) {
      const last = messages.at(-1);
      if (last?.role === "tool" && last.name === "slow_lookup") {
        yield { type: "text_delta", text: "The result is " };
        await gates.midAnswer.opened;
        yield { type: "text_delta", text: `${last.content}.` };
        return yield done(`The result is ${last.content}.`);
      }
      if (last?.role === "tool") {
        const calls = [{ id: "c2", name: "slow_lookup", arguments: JSON.stringify({ value: last.content }) }];
        return yield done("", calls);
      }
      if (last?.content === "Wait forever") {
        yield { type: "text_delta", text: "Waiting." };
        return yield done("Waiting.", [{ id: "h1", name: "hang", arguments: "{}" }]);
      }
      if (last?.content === "And now?") {
        const text = `We have talked for ${messages.length} messages.`;
        yield { type: "text_delta", text };
        return yield done(text);
      }
      yield { type: "text_delta", text: "Let me compute that." };
      const calls = [
        { id: "c1", name: "calculator", arguments: JSON.stringify({ expression: "157.09 * 493.89" }) },
      ];
      yield done("Let me compute that.", calls);
    },
  };
}

/** The web chat in headless Chromium (Debian's package; CI installs it with apt-get install -y chromium). */
describe.skipIf(!existsSync(CHROMIUM))("web chat page", () => {
  let browser: Browser;
  let url: string;
  let close: () => Promise<void>;
  const gates = { tool: gate(), midAnswer: gate() };
  let hangSignal: AbortSignal | undefined;

  beforeAll(async () => {
    const slowLookup = defineTool({
      name: "slow_lookup",
      description: "Returns its value once the test lets it.",
      parameters: z.object({ value: z.string() }),
      execute: async ({ value }) => {
        await gates.tool.opened;
        return value;
      },
    });
    const hang = defineTool({
      name: "hang",
      description: "Waits until aborted.",
      parameters: z.object({}),
      execute: (_args, { signal }) =>
        new Promise((_, reject) => {
          hangSignal = signal;
          signal.addEventListener("abort", () => reject(new Error("aborted")));
        }),
    });
    const agent = new Agent({ model: webModel(gates), tools: [...builtinTools(), slowLookup, hang] });
    const app = createApp({ agents: { calculator: agent }, apiKey: API_KEY }).app;
    const http = await new Promise<ReturnType<typeof serve>>((resolve) => {
      const s = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }, () => resolve(s));
    });
    url = `http://127.0.0.1:${(http.address() as AddressInfo).port}/`;
    close = () => new Promise((resolve) => http.close(() => resolve()));
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
      ],
    });
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await close?.();
  });

  it("asks for the API key, streams the answer, shows tool calls and results as they happen, and keeps the conversation", async () => {
    const page = await browser.newPage({ viewport: { width: 1000, height: 720 } });
    await page.goto(url);
    // Without the key the API refuses; once entered it is kept in localStorage.
    await page.locator(".error", { hasText: "Invalid or missing API key" }).waitFor();
    await page.fill("#key", API_KEY);
    await page.locator("#key").dispatchEvent("change");
    await expect.poll(() => page.locator("#model option").allTextContents()).toEqual(["calculator"]);
    await page.reload();
    await expect.poll(() => page.locator("#model option").allTextContents()).toEqual(["calculator"]);
    expect(await page.locator(".error").count()).toBe(0);

    await page.fill("#input", "What is 157.09 * 493.89?");
    await page.keyboard.press("Enter");
    // The calculator's result and the slow tool's call show while that tool still runs.
    await page.locator(".tool.pending .call", { hasText: "slow_lookup" }).waitFor();
    expect(await page.locator(".tool .call").allTextContents()).toEqual([
      '→ calculator {"expression":"157.09 * 493.89"}',
      '→ slow_lookup {"value":"77585.1801"}',
    ]);
    expect(await page.locator(".tool .result").allTextContents()).toEqual([
      expect.stringMatching(/^✓ 77585\.1801 \(\d+ ms\)$/),
    ]);
    expect(await page.locator("#send").textContent()).toBe("Stop");
    gates.tool.open();
    // Half of the answer is on the page while the model is still writing the rest.
    await page.locator(".msg.assistant", { hasText: /^The result is $/ }).waitFor();
    expect(await page.locator(".meta").count()).toBe(0);
    gates.midAnswer.open();
    await page.locator(".msg.assistant", { hasText: "The result is 77585.1801." }).waitFor();
    await page.locator(".meta", { hasText: "final_answer · 3 iteration(s)" }).waitFor();
    expect(await page.locator(".msg.assistant").allTextContents()).toEqual([
      "Let me compute that.",
      "The result is 77585.1801.",
    ]);
    expect(await page.locator(".msg.user").allTextContents()).toEqual(["What is 157.09 * 493.89?"]);

    await page.fill("#input", "And now?");
    await page.click("#send");
    // The follow-up carries the first question and answer: three messages in all.
    await page.locator(".msg.assistant", { hasText: "We have talked for 3 messages." }).waitFor();
    expect(await page.locator("#send").textContent()).toBe("Send");
    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: new URL("web-chat.png", ARTIFACTS).pathname, fullPage: true });
    await page.close();
  });

  it("stops a run with the Stop button, which aborts the run on the server", async () => {
    const page = await browser.newPage();
    await page.goto(url);
    await page.evaluate((key) => localStorage.setItem("agentloop-key", key), API_KEY);
    await page.reload();
    await page.fill("#input", "Wait forever");
    await page.keyboard.press("Enter");
    await page.locator(".tool.pending .call", { hasText: "hang" }).waitFor();
    await page.click("#send");
    await page.locator(".error", { hasText: "Stopped." }).waitFor();
    await expect.poll(() => hangSignal?.aborted).toBe(true);
    expect(await page.locator("#send").textContent()).toBe("Send");
    await page.close();
  });
});
