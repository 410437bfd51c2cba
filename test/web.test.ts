import { existsSync, mkdirSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import { type Browser, chromium } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Agent } from "../src/index.js";
import { createApp } from "../src/server/index.js";
import { scriptedModel } from "../src/testing/index.js";
import { builtinTools } from "../src/tools/builtin/index.js";

const CHROMIUM = "/usr/bin/chromium";
const ARTIFACTS = new URL("../test-artifacts/", import.meta.url);

/** The web chat in headless Chromium (Debian's package; .ci/run installs it). */
describe.skipIf(!existsSync(CHROMIUM))("web chat page", () => {
  let browser: Browser;
  let url: string;
  let close: () => Promise<void>;

  beforeAll(async () => {
    const model = scriptedModel((request) => {
      const last = request.messages.at(-1);
      if (last?.role === "tool") return { text: `The result is ${last.content}.` };
      if (last?.content === "And now?")
        return { text: `We have talked for ${request.messages.length} messages.` };
      return {
        text: "Let me compute that.",
        toolCalls: [{ name: "calculator", arguments: { expression: "157.09 * 493.89" } }],
      };
    });
    const app = createApp({ agents: { calculator: new Agent({ model, tools: builtinTools() }) } }).app;
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

  it("streams the answer, shows the tool call and its result, and keeps the conversation", async () => {
    const page = await browser.newPage();
    await page.goto(url);
    await expect.poll(() => page.locator("#model option").allTextContents()).toEqual(["calculator"]);
    await page.fill("#input", "What is 157.09 * 493.89?");
    await page.keyboard.press("Enter");
    await page.locator(".msg.assistant", { hasText: "The result is 77585.1801." }).waitFor();
    expect(await page.locator(".tool").allTextContents()).toEqual([
      '→ calculator {"expression":"157.09 * 493.89"}',
      expect.stringMatching(/^✓ calculator \(\d+ ms\): 77585\.1801$/),
    ]);
    expect(await page.locator(".msg.user").allTextContents()).toEqual(["What is 157.09 * 493.89?"]);
    await page.locator(".meta", { hasText: "final_answer" }).waitFor();

    await page.fill("#input", "And now?");
    await page.click("#send");
    await page.locator(".msg.assistant", { hasText: "We have talked for 3 messages." }).waitFor();
    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: new URL("web-chat.png", ARTIFACTS).pathname, fullPage: true });
  });
});
