// MCP elicitation (a server asks the user for input during a tool call), through the library
// against real servers: server-everything's own form, and the test server's `ask` tool, which
// sends whatever form it is given.
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { errorMessage } from "../src/core/errors.js";
import {
  connectMcpServers,
  type ElicitationHandler,
  type ElicitationRequest,
  formDefaults,
  type McpToolset,
} from "../src/mcp/index.js";

const root = (path: string) => fileURLToPath(new URL(`../${path}`, import.meta.url));
const EVERYTHING = root("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
const TEST_SERVER = root("test/support/mcp-test-server.mjs");

let toolset: McpToolset | undefined;
afterEach(async () => {
  await toolset?.close();
  toolset = undefined;
});

async function connect(command: string[], onElicitation?: ElicitationHandler) {
  const warnings: string[] = [];
  toolset = await connectMcpServers(
    { probe: { command: process.execPath, args: command } },
    { onWarning: (message) => warnings.push(message), ...(onElicitation && { onElicitation }) },
  );
  return { toolset, warnings };
}

async function call(set: McpToolset, name: string, args: Record<string, unknown> = {}): Promise<string> {
  const tool = set.tools().find((candidate) => candidate.name === name);
  if (!tool) throw new Error(`no tool '${name}'`);
  try {
    return String(await tool.execute(args, { signal: new AbortController().signal, toolCallId: "c1" }));
  } catch (error) {
    return `error: ${errorMessage(error)}`;
  }
}

const FORM = {
  type: "object",
  properties: {
    name: { type: "string", title: "Name" },
    age: { type: "integer", minimum: 0, maximum: 150, default: 30 },
    color: { type: "string", enum: ["red", "green"], default: "green" },
  },
  required: ["name"],
};

describe("onElicitation", () => {
  it("answers server-everything's form; fields left out get their defaults", async () => {
    const asked: ElicitationRequest[] = [];
    const { toolset } = await connect([EVERYTHING, "stdio"], (request) => {
      asked.push(request);
      return { action: "accept", content: { name: "Ada Lovelace", check: true } };
    });
    // The server offers this tool only to clients that declare the elicitation capability.
    const text = await call(toolset, "trigger-elicitation-request");
    expect(asked).toHaveLength(1);
    expect(asked[0]).toMatchObject({
      server: "probe",
      message: "Please provide inputs for the following fields:",
      form: { type: "object", required: ["name"] },
    });
    expect(Object.keys(asked[0]?.form.properties ?? {})).toContain("titledMultipleSelectEnum");
    expect(text).toContain("✅ User provided the requested information!");
    expect(text).toContain("- Name: Ada Lovelace");
    expect(text).toContain("- Favorite Integer: 42");
    expect(JSON.parse(text.slice(text.indexOf("{")))).toMatchObject({
      action: "accept",
      content: { untitledMultipleSelectEnum: ["Guitar"], titledSingleSelectEnum: "hero-1", number: 3.14 },
    });
  }, 30_000);

  it("is not required: without it every request is declined", async () => {
    const { toolset, warnings } = await connect([TEST_SERVER]);
    expect(await call(toolset, "ask", { message: "Your name?", form: FORM })).toBe('{"action":"decline"}');
    expect(warnings).toEqual([]);
  });

  it("passes decline and cancel through", async () => {
    let action: "decline" | "cancel" = "decline";
    const { toolset } = await connect([TEST_SERVER], () => ({ action }));
    expect(await call(toolset, "ask", { message: "Your name?", form: FORM })).toBe('{"action":"decline"}');
    action = "cancel";
    expect(await call(toolset, "ask", { message: "Your name?", form: FORM })).toBe('{"action":"cancel"}');
  });

  it("declines, with one line, a form MCP does not allow, without asking", async () => {
    const handler = () => {
      throw new Error("must not be asked");
    };
    const { toolset, warnings } = await connect([TEST_SERVER], handler);
    const nested = { type: "object", properties: { address: { type: "object", properties: {} } } };
    const notObject = { type: "string" };
    const badRequired = { type: "object", properties: { a: { type: "string" } }, required: ["b"] };
    // Defaults that do not fit their own field: the server's mistake, named as such.
    const wrongType = { type: "object", properties: { age: { type: "integer", default: "ten" } } };
    const notAChoice = {
      type: "object",
      properties: { color: { type: "string", enum: ["red", "green"], default: "purple" } },
    };
    for (const form of [nested, notObject, badRequired, wrongType, notAChoice]) {
      expect(await call(toolset, "ask", { message: "Where?", form })).toBe('{"action":"decline"}');
    }
    expect(warnings).toEqual([
      "MCP server 'probe' asked for input with a form MCP does not allow (field 'address' is a nested object; forms hold only flat string, number, integer, boolean and enum fields): declined.",
      'MCP server \'probe\' asked for input with a form MCP does not allow (the form is of type "string", not "object"; forms hold only flat string, number, integer, boolean and enum fields): declined.',
      "MCP server 'probe' asked for input with a form MCP does not allow (required field 'b' is not one of its fields): declined.",
      `MCP server 'probe' asked for input with a form whose own default does not fit ('age' defaults to "ten", which must be a number): declined.`,
      `MCP server 'probe' asked for input with a form whose own default does not fit ('color' defaults to "purple", which must be one of red, green): declined.`,
    ]);
  });

  it("declines, with one line, an answer that does not fit the form or a handler that throws", async () => {
    const answers: (() => ReturnType<ElicitationHandler>)[] = [
      () => ({ action: "accept", content: { name: "Ada", age: 200 } }),
      () => ({ action: "accept", content: { age: 3 } }),
      () => ({ action: "accept", content: { name: "Ada", color: "blue" } }),
      () => ({ action: "accept", content: { name: "Ada", shoe: 42 } }),
      () => {
        throw new Error("the form was closed");
      },
    ];
    const { toolset, warnings } = await connect([TEST_SERVER], () => (answers.shift() as () => never)());
    for (let i = 0; i < 5; i++) {
      expect(await call(toolset, "ask", { message: "Who?", form: FORM })).toBe('{"action":"decline"}');
    }
    const why = (reason: string) => `MCP server 'probe' asked for input and ${reason}: declined.`;
    expect(warnings).toEqual([
      why("the answer does not fit its form ('age' must be at most 150)"),
      why("the answer does not fit its form ('name' is required)"),
      why("the answer does not fit its form ('color' must be one of red, green)"),
      why("the answer does not fit its form ('shoe' is not one of its fields)"),
      why("the onElicitation handler threw (the form was closed)"),
    ]);
  });

  it("accepts a valid answer, with the defaults filled in", async () => {
    const { toolset } = await connect([TEST_SERVER], () => ({ action: "accept", content: { name: "Ada" } }));
    expect(JSON.parse(await call(toolset, "ask", { message: "Who?", form: FORM }))).toEqual({
      action: "accept",
      content: { name: "Ada", age: 30, color: "green" },
    });
  });

  it("can take the defaults with formDefaults, declining a form whose required fields have none", async () => {
    const { toolset } = await connect([TEST_SERVER], ({ form }) => {
      const filled = formDefaults(form);
      return filled.content ? { action: "accept", content: filled.content } : { action: "decline" };
    });
    expect(await call(toolset, "ask", { message: "Who?", form: FORM })).toBe('{"action":"decline"}');
    const optional = { ...FORM, required: [] };
    expect(JSON.parse(await call(toolset, "ask", { message: "Who?", form: optional }))).toEqual({
      action: "accept",
      content: { age: 30, color: "green" },
    });
    expect(formDefaults(FORM as Parameters<typeof formDefaults>[0])).toEqual({ missing: ["name"] });
  });
});
