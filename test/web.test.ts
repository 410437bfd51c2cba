import { existsSync, mkdirSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import { type Browser, chromium } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { Agent, defineTool, type Model, type ModelEvent } from "../src/index.js";
import { createApp } from "../src/server/index.js";
import { memoryStore } from "../src/store/index.js";
import { scriptedModel } from "../src/testing/index.js";
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
      if (last?.content === "Show Markdown") {
        for (const piece of MARKDOWN.match(/[\s\S]{1,7}/g) ?? []) yield { type: "text_delta", text: piece };
        return yield done(MARKDOWN);
      }
      if (last?.content === "Fail now") {
        return yield {
          type: "error",
          error: { code: "http_500", message: "Model API error (HTTP 500): boom" },
        };
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

/** An answer with every Markdown feature the page renders, and text that must stay text. */
const MARKDOWN = [
  "Here is **bold**, *italic* and `inline code`.",
  "",
  "- first <b>item</b>",
  "- second with [a link](https://example.com/docs) and [a trap](javascript:alert(1))",
  "",
  "1. one",
  "2. two",
  "",
  "```js",
  "<script>window.pwned = true</script>",
  `const long = "${"x".repeat(300)}";`,
  "```",
  "",
  `A long URL: https://example.com/${"very-long-path-".repeat(20)} and <img src=x onerror="window.pwned=true">`,
].join("\n");

/** The web chat in headless Chromium (Debian's package; CI installs it with apt-get install -y chromium). */
describe.skipIf(!existsSync(CHROMIUM))("web chat page", () => {
  let browser: Browser;
  let url: string;
  let notesUrl: string;
  const closers: (() => Promise<void>)[] = [];
  const gates = { tool: gate(), midAnswer: gate(), write: gate() };
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
    url = await start(createApp({ agents: { calculator: agent }, apiKey: API_KEY }).app);
    const notes = new Agent({ model: notesModel, tools: [writeNote] });
    notesUrl = await start(createApp({ agents: { notes }, store: memoryStore() }).app);
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
    for (const close of closers) await close();
  });

  /** Serves an app on a free port; its URL. */
  async function start(app: ReturnType<typeof createApp>["app"]): Promise<string> {
    const http = await new Promise<ReturnType<typeof serve>>((resolve) => {
      const s = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }, () => resolve(s));
    });
    closers.push(() => new Promise((resolve) => http.close(() => resolve())));
    return `http://127.0.0.1:${(http.address() as AddressInfo).port}/`;
  }

  /** `write_note` needs approval and, once approved, waits for `gates.write` before it writes. */
  const written: string[] = [];
  const writeNote = defineTool({
    name: "write_note",
    description: "Writes a note.",
    parameters: z.object({ text: z.string() }),
    needsApproval: true,
    execute: async ({ text }) => {
      await gates.write.opened;
      written.push(text);
      return `saved ${text}`;
    },
  });
  /** Asks to write what follows "Save "; then tells what happened to the call. */
  const notesModel = scriptedModel((request) => {
    const last = request.messages.at(-1);
    if (last?.role === "tool") {
      return {
        text: last.isError ? `Understood: I did not save it (${last.content})` : `Done: ${last.content}.`,
      };
    }
    const text = String(last?.content).replace(/^Save /, "");
    return {
      text: "I will save it.",
      toolCalls: [{ id: `w-${text}`, name: "write_note", arguments: { text } }],
    };
  });

  it("asks for the API key, streams the answer, shows tool calls and results as they happen, and keeps the conversation", async () => {
    const page = await browser.newPage({ viewport: { width: 1000, height: 720 } });
    const violations: string[] = [];
    page.on("console", (message) => {
      if (/Content.Security.Policy/i.test(message.text())) violations.push(message.text());
    });
    // No request of the page's goes unanswered: the icon is inline, not a 404 for /favicon.ico.
    const notFound: string[] = [];
    page.on("response", (response) => {
      if (response.status() === 404) notFound.push(response.url());
    });
    await page.goto(url);
    // Without the key the API refuses; once entered it is used, but kept in the page's memory only.
    await page.locator(".error", { hasText: "Invalid or missing API key" }).waitFor();
    await page.fill("#key", API_KEY);
    await page.locator("#key").dispatchEvent("change");
    await expect.poll(() => page.locator("#model option").allTextContents()).toEqual(["calculator"]);
    expect(await page.evaluate(() => localStorage.length + sessionStorage.length)).toBe(0);
    expect(await page.locator("#busy").isVisible()).toBe(false);

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
    expect(await page.locator("#busy").isVisible()).toBe(true);
    expect(await page.locator("#busy").textContent()).toBe("Running slow_lookup…");
    gates.tool.open();
    // Half of the answer is on the page while the model is still writing the rest.
    await page.locator(".msg.assistant", { hasText: /^The result is $/ }).waitFor();
    expect(await page.locator(".meta").count()).toBe(0);
    expect(await page.locator("#busy").textContent()).toBe("Thinking…");
    gates.midAnswer.open();
    await page.locator(".msg.assistant", { hasText: "The result is 77585.1801." }).waitFor();
    await page.locator(".meta", { hasText: "final_answer · 3 iterations" }).waitFor();
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
    await page.locator("#busy").waitFor({ state: "hidden" });
    expect(await page.evaluate(() => localStorage.length + sessionStorage.length)).toBe(0);
    expect(await page.inputValue("#key")).toBe(API_KEY);
    expect(violations).toEqual([]);
    expect(notFound).toEqual([]);
    // The icon: inline in the page, and at /favicon.ico, where browsers look for it anyway.
    expect(await page.evaluate('document.querySelector("link[rel=icon]")?.href')).toMatch(
      /^data:image\/svg\+xml,/,
    );
    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: new URL("web-chat.png", ARTIFACTS).pathname, fullPage: true });
    const icon = await page.goto(new URL("/favicon.ico", url).href);
    expect(icon?.status()).toBe(200);
    expect(icon?.headers()["content-type"]).toBe("image/svg+xml");
    await page.close();
  });

  it("renders answers as safe Markdown and errors as errors, and fits a 390 px wide phone", async () => {
    const page = await browser.newPage({ viewport: { width: 390, height: 844 } });
    await page.goto(url);
    await page.fill("#key", API_KEY);
    await page.locator("#key").dispatchEvent("change");
    await page.fill("#input", "Show Markdown");
    await page.keyboard.press("Enter");
    await page.locator(".meta", { hasText: "final_answer" }).waitFor();
    const answer = page.locator(".msg.assistant").last();
    expect(await answer.locator("strong").allTextContents()).toEqual(["bold"]);
    expect(await answer.locator("em").allTextContents()).toEqual(["italic"]);
    expect(await answer.locator(":not(pre) > code").allTextContents()).toEqual(["inline code"]);
    expect(await answer.locator("ul > li").count()).toBe(2);
    expect(await answer.locator("ol > li").allTextContents()).toEqual(["one", "two"]);
    expect(await answer.locator("pre > code.language-js").textContent()).toContain(
      "<script>window.pwned = true</script>",
    );
    // Markup in the answer stays text; only http(s) links become links.
    expect(await answer.locator("script, img, b").count()).toBe(0);
    expect(await answer.locator("ul > li").first().textContent()).toBe("first <b>item</b>");
    expect(
      await answer.locator("a").evaluateAll((links) => links.map((a) => a.getAttribute("href"))),
    ).toEqual(["https://example.com/docs", `https://example.com/${"very-long-path-".repeat(20)}`]);
    expect(await answer.textContent()).toContain("[a trap](javascript:alert(1))");
    // (Strings run in the page: the project's types have no DOM.)
    expect(await page.evaluate("window.pwned")).toBeUndefined();

    await page.fill("#input", "Fail now");
    await page.keyboard.press("Enter");
    const error = page.locator(".error", { hasText: "Model API error (HTTP 500): boom" });
    await error.waitFor();
    expect(await error.getAttribute("role")).toBe("alert");
    expect(await page.evaluate('getComputedStyle(document.querySelector(".error:last-child")).color')).toBe(
      "rgb(229, 72, 77)",
    );
    expect(await page.locator("#send").textContent()).toBe("Send");

    // Nothing is wider than the phone: long code scrolls inside its block, long URLs wrap.
    const overflow = await page.evaluate(`({
      page: document.documentElement.scrollWidth - window.innerWidth,
      log: document.getElementById("log").scrollWidth - document.getElementById("log").clientWidth,
      header: document.querySelector("header").scrollWidth - window.innerWidth,
    })`);
    expect(overflow).toEqual({ page: 0, log: 0, header: 0 });
    // The message box's placeholder shows whole: as its text it would neither wrap nor scroll.
    const placeholder = await page.evaluate(`(() => {
      const box = document.getElementById("input");
      box.value = box.placeholder;
      const fits = box.scrollWidth <= box.clientWidth && box.scrollHeight <= box.clientHeight;
      box.value = "";
      return fits;
    })()`);
    expect(placeholder).toBe(true);
    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: new URL("web-chat-390.png", ARTIFACTS).pathname, fullPage: true });
    await page.close();
  });

  it("stops a run with the Stop button, which aborts the run on the server", async () => {
    const page = await browser.newPage();
    await page.goto(url);
    await page.fill("#key", API_KEY);
    await page.fill("#input", "Wait forever");
    await page.keyboard.press("Enter");
    await page.locator(".tool.pending .call", { hasText: "hang" }).waitFor();
    await page.click("#send");
    await page.locator(".meta", { hasText: "Stopped." }).waitFor();
    await expect.poll(() => hangSignal?.aborted).toBe(true);
    expect(await page.locator("#send").textContent()).toBe("Send");
    await page.close();
  });

  it("asks before a call that needs approval: Approve runs it and the answer streams in, Deny lets the model read the refusal", async () => {
    const page = await browser.newPage({ viewport: { width: 1000, height: 720 } });
    await page.goto(notesUrl);
    await page.fill("#input", "Save hi");
    await page.keyboard.press("Enter");
    const card = page.locator(".tool.approval", { hasText: 'write_note {"text":"hi"}' });
    await card.locator("button.approve").waitFor();
    await page.locator(".meta", { hasText: /^approval_required · 1 iteration · \d+ tokens$/ }).waitFor();
    expect(await page.locator(".msg.assistant").allTextContents()).toEqual([
      "I will save it.",
      'Waiting for approval: write_note({"text":"hi"}) [w-hi]',
    ]);
    expect(await page.locator("#send").textContent()).toBe("Send");
    expect(written).toEqual([]);

    await card.locator("button.approve").click();
    // The continuation streams: the approved call shows while it runs, then its result and the answer.
    await page.locator(".tool.pending .call", { hasText: "write_note" }).waitFor();
    // Decided: the buttons give way to the decision, and the note naming the waiting call goes.
    expect(await card.locator("button").count()).toBe(0);
    expect(await card.locator(".result").textContent()).toBe("✓ Approved");
    expect(await page.locator(".msg.assistant").allTextContents()).toEqual(["I will save it."]);
    expect(await page.locator("#busy").textContent()).toBe("Running write_note…");
    gates.write.open();
    await page.locator(".msg.assistant", { hasText: "Done: saved hi." }).waitFor();
    await page.locator(".meta", { hasText: "final_answer · 2 iterations" }).waitFor();
    expect(await page.locator(".msg.assistant").allTextContents()).toEqual([
      "I will save it.",
      "Done: saved hi.",
    ]);
    expect(written).toEqual(["hi"]);
    expect(await page.locator(".tool:not(.approval) .result").allTextContents()).toEqual([
      expect.stringMatching(/^✓ saved hi \(\d+ ms\)$/),
    ]);

    await page.fill("#input", "Save secret");
    await page.keyboard.press("Enter");
    const second = page.locator(".tool.approval", { hasText: 'write_note {"text":"secret"}' });
    await second.locator("button.deny").click();
    await page.locator(".msg.assistant", { hasText: "Understood: I did not save it" }).waitFor();
    expect(await page.locator(".msg.assistant").last().textContent()).toBe(
      "Understood: I did not save it (The user declined this call: it was not run.)",
    );
    expect(await second.locator(".result").textContent()).toBe("✗ Denied");
    expect(await second.locator("button").count()).toBe(0);
    expect(await page.locator(".msg.assistant", { hasText: "Waiting for approval" }).count()).toBe(0);
    expect(written).toEqual(["hi"]);
    // The page's conversation went on in one thread: the second turn carried the first.
    const turn = notesModel.requests.at(-2)?.messages.map((m) => m.role);
    expect(turn).toEqual(["user", "assistant", "user"]);
    // ...without the note about the waiting call, which was for the person, not the model.
    expect(notesModel.requests.at(-2)?.messages[1]?.content).toBe("I will save it.\n\nDone: saved hi.");
    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: new URL("web-chat-approvals.png", ARTIFACTS).pathname, fullPage: true });
    await page.close();
  });
});
