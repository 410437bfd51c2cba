// The web chat with sub-agents, in headless Chromium: a child's calls, results and answer fold
// under the call that delegated to it (never in the answer's bubble); a child's call that needs
// approval gets Approve and Deny naming the agent, and approving it continues the child, then
// its parent.
import { existsSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import { type Browser, chromium } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { Agent, defineTool } from "../src/index.js";
import { createApp } from "../src/server/index.js";
import { memoryStore } from "../src/store/index.js";
import { scriptedModel } from "../src/testing/index.js";

const CHROMIUM = "/usr/bin/chromium";

describe.skipIf(!existsSync(CHROMIUM))("web chat with sub-agents", () => {
  let browser: Browser;
  let url: string;
  let close: (() => Promise<void>) | undefined;
  const written: string[] = [];

  beforeAll(async () => {
    const write = defineTool({
      name: "write_note",
      description: "Writes a note.",
      parameters: z.object({ text: z.string() }),
      needsApproval: true,
      execute: ({ text }) => {
        written.push(text);
        return `saved ${text}`;
      },
    });
    const lookup = defineTool({
      name: "lookup",
      description: "Looks a fact up.",
      parameters: z.object({ what: z.string() }),
      execute: () => "water boils at 100 C",
    });
    const writer = new Agent({
      model: scriptedModel((request) =>
        request.messages.at(-1)?.role === "tool"
          ? { text: "The writer saved it." }
          : {
              text: "Writing now.",
              toolCalls: [{ id: "w1", name: "write_note", arguments: { text: "boils" } }],
            },
      ),
      tools: [write, lookup],
      description: "Looks facts up and writes notes.",
    });
    const lead = new Agent({
      model: scriptedModel((request) =>
        request.messages.at(-1)?.role === "tool"
          ? { text: `Done: ${request.messages.at(-1)?.content}` }
          : {
              toolCalls: [
                { id: "d1", name: "delegate_task", arguments: { agent: "writer", task: "Note it." } },
              ],
            },
      ),
      agents: { writer },
    });
    const app = createApp({ agents: { lead }, store: memoryStore() }).app;
    const http = await new Promise<ReturnType<typeof serve>>((resolve) => {
      const s = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }, () => resolve(s));
    });
    close = () => new Promise((resolve) => http.close(() => resolve()));
    url = `http://127.0.0.1:${(http.address() as AddressInfo).port}/`;
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
      ],
    });
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await close?.();
  });

  it("folds a child's work under the delegating call; approving the child's call continues the child, then its parent", async () => {
    const page = await browser.newPage({ viewport: { width: 1000, height: 720 } });
    await page.goto(url);
    await page.fill("#input", "Note the boiling point.");
    await page.keyboard.press("Enter");
    const approval = page.locator(".tool.approval", { hasText: 'writer: write_note {"text":"boils"}' });
    await approval.locator("button.approve").waitFor();
    // The child's work is inside the delegate_task card, under a fold named after it.
    const call = page
      .locator(".tool", { has: page.locator(".call", { hasText: /^→ delegate_task/ }) })
      .first();
    const fold = call.locator("details.sub");
    expect(await fold.locator("summary").textContent()).toBe("writer");
    expect(await fold.locator(".call").allTextContents()).toEqual([
      '→ write_note {"text":"boils"}',
      "waits for approval: write_note",
    ]);
    // The child's text is not the answer.
    expect(await page.locator(".msg.assistant", { hasText: "Writing now." }).count()).toBe(0);
    expect(written).toEqual([]);

    await approval.locator("button.approve").click();
    await page.locator(".msg.assistant", { hasText: "Done: The writer saved it." }).waitFor();
    await page.locator(".meta", { hasText: /^final_answer/ }).waitFor();
    expect(written).toEqual(["boils"]);
    // The continuation's child work folds under its call too.
    expect(await page.locator("details.sub .result", { hasText: "✓ saved boils" }).count()).toBe(1);
    expect(
      await page.locator("details.sub .result", { hasText: "final_answer: The writer saved it." }).count(),
    ).toBe(1);
    await page.close();
  });
});
