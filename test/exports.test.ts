import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const ROOT = fileURLToPath(new URL("..", import.meta.url));

const dist = (path: string) => readFileSync(new URL(`../dist/${path}`, import.meta.url), "utf8");

const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as {
  exports: Record<string, string | { types: string }>;
};

/** Every relative import reachable from a built entry point. */
function reachable(entry: string, seen = new Set<string>()): Set<string> {
  if (seen.has(entry)) return seen;
  seen.add(entry);
  const source = dist(entry);
  for (const [, spec] of source.matchAll(/from "([^"]+)"/g)) {
    if (spec?.startsWith(".")) reachable(new URL(spec, `file:///${entry}`).pathname.slice(1), seen);
    else if (spec) seen.add(`pkg:${spec}`);
  }
  return seen;
}

/**
 * The files (relative to the project) a fresh Node.js process loads while it runs `code`, an ES
 * module evaluated in the project's folder, recorded by a module hook that sees `import` and
 * `require` alike.
 */
function filesLoadedBy(code: string): string[] {
  const hook = `
    import { registerHooks } from "node:module";
    const seen = new Set();
    registerHooks({ resolve(specifier, context, next) { const r = next(specifier, context); seen.add(r.url); return r; } });
    process.on("exit", () => process.stdout.write(JSON.stringify([...seen])));`;
  const child = spawnSync(
    process.execPath,
    ["--import", `data:text/javascript,${encodeURIComponent(hook)}`, "--input-type=module", "-e", code],
    { cwd: ROOT, encoding: "utf8" },
  );
  expect(child.stderr).toBe("");
  return (JSON.parse(child.stdout) as string[])
    .filter((url) => url.startsWith("file:"))
    .map((url) => fileURLToPath(url).slice(ROOT.length));
}

/**
 * The names (values and types) an entry point's built declarations export: each listed by name,
 * none through `export *`, which would pass on whatever an implementation file exports.
 */
function declaredNames(declarations: string): string[] {
  const source = readFileSync(new URL(`../${declarations}`, import.meta.url), "utf8");
  expect(source, declarations).not.toMatch(/^export \*/m);
  const names = new Set<string>();
  for (const [, list = ""] of source.matchAll(/^export (?:type )?\{([^}]*)\}/gm)) {
    for (const item of list.split(",")) {
      const name = item
        .trim()
        .replace(/^type /, "")
        .split(" as ")
        .pop()
        ?.trim();
      if (name) names.add(name);
    }
  }
  const declared =
    /^export (?:declare )?(?:abstract )?(?:function|const|let|class|interface|type|enum) ([\w$]+)/gm;
  for (const [, name = ""] of source.matchAll(declared)) names.add(name);
  return [...names].sort();
}

/**
 * Every entry point's public names: what a user may import from it. A name added or removed here
 * is a change of the package's API; implementation helpers (request mappers, stream assemblers,
 * test and CLI helpers) are imported from their modules, never through an entry point.
 */
const ENTRY_POINTS: Record<string, { values: string[]; types: string[] }> = {
  ".": {
    values: [
      "Agent",
      "AgentloopError",
      "DEFAULTS",
      "DEFAULT_PRICES",
      "RUN_STATE_VERSION",
      "RunHandle",
      "Session",
      "calculator",
      "contextManager",
      "contextWindowFor",
      "convertTemperature",
      "defineTool",
      "getCurrentTime",
      "recorder",
      "tokenCounterFor",
      "toolOutput",
      "truncateToTokens",
    ],
    types: [
      "AgentEvent",
      "AgentEventBody",
      "AgentEventType",
      "AgentOptions",
      "AgentloopErrorCode",
      "AnyAgent",
      "ApprovalDecision",
      "AssistantMessage",
      "Budget",
      "ChildRun",
      "ClientTool",
      "ClientToolResult",
      "CompactResult",
      "CompactionOptions",
      "ContextManager",
      "ContextOptions",
      "ContextTransform",
      "GuardState",
      "ImageInput",
      "IterationRecord",
      "JsonSchema",
      "JsonSchemaToolDefinition",
      "MediaPart",
      "Message",
      "Mode",
      "Model",
      "ModelError",
      "ModelEvent",
      "ModelPrice",
      "ModelReply",
      "ModelRequest",
      "OutputOf",
      "OutputSchema",
      "PendingApproval",
      "PendingCalls",
      "PriceTable",
      "Recorder",
      "ResumeOptions",
      "RunOptions",
      "RunResult",
      "RunResultFields",
      "RunState",
      "RunStatus",
      "StopOutcome",
      "StopReason",
      "TextInput",
      "TokenCounter",
      "Tool",
      "ToolAnnotations",
      "ToolCall",
      "ToolChoice",
      "ToolContext",
      "ToolMessage",
      "ToolOutput",
      "ToolProtocol",
      "ToolSpec",
      "Usage",
      "UserInput",
      "UserMessage",
      "ZodToolDefinition",
    ],
  },
  "./openai": {
    values: ["openAIChatModel", "openAIResponsesModel"],
    types: ["OpenAIChatModelOptions", "OpenAIResponsesModelOptions"],
  },
  "./anthropic": {
    values: ["anthropicModel"],
    types: ["AnthropicModelOptions", "AnthropicStructuredOutput"],
  },
  "./mcp": {
    values: [
      "TokenStoreError",
      "connectMcpServers",
      "fileTokenStore",
      "formDefaults",
      "memoryTokenStore",
      "openInBrowser",
    ],
    types: [
      "ConnectMcpOptions",
      "ElicitationContent",
      "ElicitationField",
      "ElicitationForm",
      "ElicitationHandler",
      "ElicitationRequest",
      "ElicitationResult",
      "McpHttpServerConfig",
      "McpOAuthConfig",
      "McpOAuthRecord",
      "McpPromptInfo",
      "McpRoot",
      "McpServerConfig",
      "McpServerOptions",
      "McpServerStatus",
      "McpStdioServerConfig",
      "McpTokenStore",
      "McpToolFilter",
      "McpToolSource",
      "McpToolset",
      "McpTransportKind",
      "McpTransportServerConfig",
      "TokenStoreErrorCode",
    ],
  },
  "./server": {
    values: ["createApp"],
    types: [
      "AgentServer",
      "Chunk",
      "ClientKey",
      "Completion",
      "Metrics",
      "OpenAIErrorBody",
      "RunView",
      "ServerEnv",
      "ServerOptions",
      "ShutdownOptions",
      "WireUsage",
    ],
  },
  "./store": {
    values: ["SESSION_ID_PATTERN", "StoreError", "memoryStore", "postgresStore", "sqliteStore"],
    types: [
      "Checkpoint",
      "Json",
      "PostgresStoreOptions",
      "RunRecord",
      "RunRecordInput",
      "RunRecordStatus",
      "SessionHandle",
      "SessionStore",
      "SessionSummary",
      "SqliteStoreOptions",
      "StoreErrorCode",
      "StoredSession",
      "TakeOver",
    ],
  },
  "./testing": {
    values: [
      "DEMO_QUESTIONS",
      "demoModel",
      "replayModel",
      "replayTools",
      "scriptedModel",
      "startFakeAnthropicServer",
      "startFakeOpenAIServer",
      "startFakeResponsesServer",
    ],
    types: [
      "FakeAnthropicReply",
      "FakeAnthropicResponder",
      "FakeAnthropicResponse",
      "FakeAnthropicServer",
      "FakeAnthropicToolCall",
      "FakeFault",
      "FakeOpenAIServer",
      "FakeReply",
      "FakeRequest",
      "FakeResponder",
      "FakeResponse",
      "FakeResponsesReply",
      "FakeResponsesResponder",
      "FakeResponsesResponse",
      "FakeResponsesServer",
      "FakeToolCall",
      "ReplayOptions",
      "ScriptedError",
      "ScriptedModel",
      "ScriptedModelOptions",
      "ScriptedReply",
      "ScriptedResponder",
      "ScriptedStep",
    ],
  },
};

/** What each entry point of package.json exports: its values (at run time) and its types. */
async function publicSurface(): Promise<Record<string, { values: string[]; types: string[] }>> {
  const surface: Record<string, { values: string[]; types: string[] }> = {};
  for (const [entry, target] of Object.entries(pkg.exports)) {
    if (entry === "./package.json") continue;
    const values = Object.keys(await import(`agentloop-runtime${entry.slice(1)}`)).sort();
    const declared = declaredNames(typeof target === "string" ? target : target.types);
    expect(declared, entry).toEqual(expect.arrayContaining(values));
    surface[entry] = { values, types: declared.filter((name) => !values.includes(name)) };
  }
  return surface;
}

describe("what importing agentloop loads", () => {
  it('import("agentloop-runtime") loads no dependency but @opentelemetry/api (no zod, no SDK, no exporter) and no provider, MCP, server, store or CLI code', () => {
    const loaded = filesLoadedBy('await import("agentloop-runtime");');
    expect(loaded).toContain("dist/index.js");
    expect(loaded.filter((path) => !path.startsWith("dist/") && !isTracingApi(path))).toEqual([]);
    expect(
      loaded.filter((path) => /^dist\/(models\/(openai|anthropic)|mcp|server|store|cli|testing)/.test(path)),
    ).toEqual([]);
  });

  it("a run loads no dependency either: the tokenizer comes with the first request near the budget, zod with the first tool that needs it", () => {
    const run = (maxContextTokens: number) => `
      const { Agent } = await import("agentloop-runtime");
      const { scriptedModel } = await import("agentloop-runtime/testing");
      const model = scriptedModel([{ text: "4" }], { id: "gpt-4o-mini" });
      const result = await new Agent({ model, maxContextTokens: ${maxContextTokens} }).run("What is 2+2? ".repeat(20));
      if (result.text !== "4") throw new Error(result.text);`;
    expect(
      filesLoadedBy(run(100_000)).filter((path) => !path.startsWith("dist/") && !isTracingApi(path)),
    ).toEqual([]);
    expect(filesLoadedBy(run(200))).toContain("node_modules/gpt-tokenizer/cjs/encoding/o200k_base.js");
    const withTool = filesLoadedBy(`
      const { defineTool } = await import("agentloop-runtime");
      defineTool({ name: "t", description: "d", parameters: { type: "object" }, execute: () => "" });`);
    expect(withTool).toContain("node_modules/zod/index.js");
  });
});

/** A file of `@opentelemetry/api`, the one dependency the library loads up front (SPEC section 11). */
const isTracingApi = (path: string) => path.includes("@opentelemetry/api/");

describe("what tracing loads", () => {
  it("a run with tracing on (an SDK's provider given) loads no SDK or exporter code of its own", () => {
    const loaded = filesLoadedBy(`
      const { Agent } = await import("agentloop-runtime");
      const { scriptedModel } = await import("agentloop-runtime/testing");
      const { trace } = await import("@opentelemetry/api");
      const calls = [];
      const span = { isRecording: () => true, spanContext: () => ({ traceId: "1".repeat(32), spanId: "2".repeat(16), traceFlags: 1 }),
        setAttribute() { return this; }, setStatus() { return this; }, end() { calls.push("end"); } };
      const tracerProvider = { getTracer: () => ({ startSpan: (name) => { calls.push(name); return span; } }) };
      const result = await new Agent({ model: scriptedModel([{ text: "4" }]), tracerProvider }).run("2+2?");
      if (result.text !== "4" || !calls.includes("invoke_agent agentloop") || !calls.includes("chat scripted")) throw new Error(calls.join());`);
    expect(loaded.filter((path) => path.includes("@opentelemetry/") && !isTracingApi(path))).toEqual([]);
  });
});

describe("public surface", () => {
  it("keeps the root export free of provider SDKs, the CLI and test helpers", () => {
    const modules = [...reachable("index.js")];
    expect(
      modules.filter(
        (m) => m.startsWith("pkg:") && !m.startsWith("pkg:node:") && m !== "pkg:@opentelemetry/api",
      ),
    ).toEqual([]);
    expect(modules.some((m) => m.startsWith("cli/") || m.startsWith("testing/"))).toBe(false);
    expect(modules.some((m) => m.startsWith("store/") || m === "pkg:node:sqlite")).toBe(false);
  });

  it("loads node:sqlite and pg only when their store is opened (the memory store works without them)", () => {
    const modules = [...reachable("store/index.js")];
    expect(modules.filter((m) => m.startsWith("pkg:") && !m.startsWith("pkg:node:"))).toEqual([]);
    expect(modules).not.toContain("pkg:node:sqlite");
    expect(dist("store/sqlite-store.js")).toContain('import("node:sqlite")');
    expect(modules).not.toContain("pkg:pg");
    expect(dist("store/postgres-store.js")).toContain('import("pg")');
  });

  it("exposes the documented entry points", async () => {
    const root = await import("agentloop-runtime");
    expect(Object.keys(root).sort()).toEqual(ENTRY_POINTS["."]?.values);
    const testing = await import("agentloop-runtime/testing");
    expect(typeof testing.scriptedModel).toBe("function");
    expect(typeof testing.startFakeOpenAIServer).toBe("function");
    expect(typeof testing.demoModel).toBe("function");
    expect(testing.DEMO_QUESTIONS).toHaveLength(3);
    const openai = await import("agentloop-runtime/openai");
    expect(typeof openai.openAIChatModel).toBe("function");
    expect(typeof openai.openAIResponsesModel).toBe("function");
    expect(typeof testing.startFakeResponsesServer).toBe("function");
    const anthropic = await import("agentloop-runtime/anthropic");
    expect(typeof anthropic.anthropicModel).toBe("function");
    expect(typeof testing.startFakeAnthropicServer).toBe("function");
    const mcp = await import("agentloop-runtime/mcp");
    expect(typeof mcp.connectMcpServers).toBe("function");
    const store = await import("agentloop-runtime/store");
    expect(Object.keys(store).sort()).toEqual(ENTRY_POINTS["./store"]?.values);
  });
});

describe("every entry point's names", () => {
  it("are pinned, for every entry point of package.json, values and types alike, none through export *", async () => {
    expect(await publicSurface()).toEqual(ENTRY_POINTS);
  });

  it("name one thing once: no name is exported by two entry points (one RunStatus)", async () => {
    const seen = new Map<string, string>();
    const twice: string[] = [];
    for (const [entry, { values, types }] of Object.entries(await publicSurface())) {
      for (const name of [...values, ...types]) {
        const other = seen.get(name);
        if (other !== undefined) twice.push(`${name} (${other} and ${entry})`);
        seen.set(name, entry);
      }
    }
    expect(twice).toEqual([]);
  });
});
