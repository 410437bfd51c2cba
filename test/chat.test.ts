import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { type FakeOpenAIServer, startFakeOpenAIServer } from "../src/testing/fake-openai-server.js";
import { runCli } from "./helpers.js";
import { terminal } from "./support/terminal.js";

let server: FakeOpenAIServer | undefined;
afterEach(async () => {
  await server?.close();
});

/** Drives `agentloop chat` through a pseudo-terminal, like a person at a keyboard. */
const startChat = (env: Record<string, string>, args: string[] = []) => terminal(["chat", ...args], { env });

describe("agentloop chat in a terminal", () => {
  it("streams answers, shows tool calls, keeps the conversation, resets, and exits", async () => {
    server = await startFakeOpenAIServer({
      respond: (request, index) => {
        const last = request.body.messages.at(-1);
        if (last.role === "user" && last.content === "what is 6*7?") {
          return { toolCalls: [{ name: "calculator", arguments: { expression: "6*7" } }] };
        }
        if (last.role === "tool") return { text: "It is 42." };
        return { text: `Reply ${index} after ${request.body.messages.length} messages.` };
      },
    });
    const chat = startChat({ OPENAI_BASE_URL: server.url, OPENAI_API_KEY: "sk-test" });
    await chat.waitFor("› ");
    chat.type("what is 6*7?\r");
    await chat.waitFor("It is 42.");
    expect(chat.output).toMatch(/✓.*calculator.*\(\d+ ms\).*42/);
    await chat.waitFor("› ");

    chat.type("and again?\r");
    await chat.waitFor("after 5 messages."); // user, assistant+call, tool, assistant, user
    chat.type("/tools\r");
    await chat.waitFor("convert_temperature");
    chat.type("/reset\r");
    await chat.waitFor("New conversation.");
    chat.type("fresh start\r");
    await chat.waitFor("after 1 messages.");
    chat.type("/exit\r");
    if (process.env.SHOW_CHAT) console.log(chat.output);
    expect(await chat.exited).toBe(0);
  });

  it("stops the current answer on Ctrl+C and exits on a second Ctrl+C at the prompt", async () => {
    server = await startFakeOpenAIServer({
      respond: () => ({ stall: true, afterText: "Let me think about" }),
    });
    const chat = startChat({ OPENAI_BASE_URL: server.url, OPENAI_API_KEY: "sk-test" });
    await chat.waitFor("› ");
    chat.type("a hard question\r");
    await chat.waitFor("Let me think about");
    chat.type("\x03");
    await chat.waitFor("aborted");
    await chat.waitFor("› ");
    chat.type("\x03");
    await chat.waitFor("press Ctrl+C again to exit");
    chat.type("\x03");
    expect(await chat.exited).toBe(0);
  });

  it("ends on Ctrl+D at the prompt with a new line, so the shell's prompt starts on its own", async () => {
    server = await startFakeOpenAIServer({ respond: () => ({ text: "Hi." }) });
    const chat = startChat({ OPENAI_BASE_URL: server.url, OPENAI_API_KEY: "sk-test" });
    await chat.waitFor("› ");
    chat.type("hello\r");
    await chat.waitFor("Hi.");
    await chat.waitFor("› ");
    chat.type("\x04");
    expect(await chat.exited).toBe(0);
    // The prompt, the cursor put after it (ESC [3G), then the new line.
    expect(chat.output.endsWith("› \x1b[3G\r\n")).toBe(true);
  });

  it("on Ctrl+D mid-answer finishes the answer, then ends (exit 0) with the shell's prompt on its own line", async () => {
    let answer: (reply: { text: string }) => void = () => {};
    server = await startFakeOpenAIServer({
      respond: () => new Promise((resolve) => (answer = resolve)),
    });
    const chat = startChat({ OPENAI_BASE_URL: server.url, OPENAI_API_KEY: "sk-test" });
    await chat.waitFor("› ");
    chat.type("hello\r");
    await chat.waitFor("thinking");
    chat.type("\x04");
    await new Promise((resolve) => setTimeout(resolve, 300));
    answer({ text: "Hi there." });
    await chat.waitFor("Hi there.");
    expect(await chat.exited).toBe(0);
    expect(chat.output).not.toContain("error");
    expect(chat.output.endsWith("Hi there.\r\n")).toBe(true);
  });

  it("stops the answer on Ctrl+C after Ctrl+D ended the input mid-answer, storing the run as aborted", async () => {
    server = await startFakeOpenAIServer({
      respond: () => ({ stall: true, afterText: "Let me think about" }),
    });
    const dir = mkdtempSync(join(tmpdir(), "agentloop-chat-"));
    const env = { OPENAI_BASE_URL: server.url, OPENAI_API_KEY: "sk-test" };
    const chat = terminal(["chat", "--session", "s"], { env, cwd: dir });
    await chat.waitFor("› ");
    chat.type("a hard question\r");
    await chat.waitFor("Let me think about");
    // Ctrl+D closes the line reader (the terminal leaves raw mode): Ctrl+C is then a real SIGINT.
    chat.type("\x04");
    await new Promise((resolve) => setTimeout(resolve, 300));
    chat.type("\x03");
    await chat.waitFor("aborted");
    expect(await chat.exited).toBe(130);
    const ls = await runCli(["sessions", "ls", "--json"], { env, cwd: dir });
    expect(JSON.parse(ls.stdout)).toMatchObject([{ id: "s", status: "completed", stopReason: "aborted" }]);
  });

  it("with --verbose ends each answer with its summary, and names the time limit that stopped one", async () => {
    server = await startFakeOpenAIServer({
      respond: (_request, index) => (index === 0 ? { text: "Hi." } : { stall: true, afterText: "Let me" }),
    });
    const env = { OPENAI_BASE_URL: server.url, OPENAI_API_KEY: "sk-test" };
    const chat = await runCli(["chat", "--verbose", "--timeout", "0.5"], {
      env,
      input: "hello\nthink hard\n",
    });
    expect(chat.code).toBe(0);
    const lines = chat.stdout.split("\n");
    expect(lines[0]).toBe("Hi.");
    expect(lines[1]).toMatch(
      /^\(final_answer · 1 iteration · \d+ tokens in, \d+ out · [\d.]+ (ms|s) · \$0\)$/,
    );
    expect(lines.slice(2, 4)).toEqual([
      "Let me",
      "(aborted: stopped after the 0.5 s time limit (--timeout); raise --timeout to allow more)",
    ]);
    expect(lines[4]).toMatch(/^\(aborted · 1 iteration · /);
  });

  it("answers ask_question inline in explicit mode", async () => {
    server = await startFakeOpenAIServer({
      respond: (request) => {
        const last = request.body.messages.at(-1);
        if (last.content === "plan a trip") {
          return { toolCalls: [{ name: "ask_question", arguments: { question: "Where to?" } }] };
        }
        return {
          toolCalls: [{ name: "task_completion", arguments: { result: `Trip to ${last.content} planned.` } }],
        };
      },
    });
    const chat = startChat({ OPENAI_BASE_URL: server.url, OPENAI_API_KEY: "sk-test" }, [
      "--mode",
      "explicit",
    ]);
    await chat.waitFor("› ");
    chat.type("plan a trip\r");
    await chat.waitFor("? Where to?");
    await chat.waitFor("› ");
    chat.type("Lisbon\r");
    await chat.waitFor("Trip to Lisbon planned.");
    chat.type("/exit\r");
    expect(await chat.exited).toBe(0);
  });
});

describe("agentloop chat with piped input", () => {
  it("answers every line in order, keeping the conversation, then exits 0 at the end of input", async () => {
    server = await startFakeOpenAIServer({
      respond: (request) => ({ text: `You said ${request.body.messages.at(-1).content}.` }),
    });
    const env = { OPENAI_BASE_URL: server.url, OPENAI_API_KEY: "sk-test" };
    const run = await runCli(["chat"], { env, input: "first\nsecond\n\nthird" });
    expect(run).toMatchObject({ code: 0, stdout: "You said first.\nYou said second.\nYou said third.\n" });
    expect(server.requests).toHaveLength(3);
    const last = server.requests[2]?.body.messages.map((m: { role: string; content: string }) => m.content);
    expect(last).toEqual(["first", "You said first.", "second", "You said second.", "third"]);
  });
});
