import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const ROOT = fileURLToPath(new URL("..", import.meta.url));

const dist = (path: string) => readFileSync(new URL(`../dist/${path}`, import.meta.url), "utf8");

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

describe("what importing agentloop loads", () => {
  it('import("agentloop-runtime") loads no dependency (no zod, no SDK) and no provider, MCP, server, store or CLI code', () => {
    const loaded = filesLoadedBy('await import("agentloop-runtime");');
    expect(loaded).toContain("dist/index.js");
    expect(loaded.filter((path) => !path.startsWith("dist/"))).toEqual([]);
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
    expect(filesLoadedBy(run(100_000)).filter((path) => !path.startsWith("dist/"))).toEqual([]);
    expect(filesLoadedBy(run(200))).toContain("node_modules/gpt-tokenizer/cjs/encoding/o200k_base.js");
    const withTool = filesLoadedBy(`
      const { defineTool } = await import("agentloop-runtime");
      defineTool({ name: "t", description: "d", parameters: { type: "object" }, execute: () => "" });`);
    expect(withTool).toContain("node_modules/zod/index.js");
  });
});

describe("public surface", () => {
  it("keeps the root export free of provider SDKs, the CLI and test helpers", () => {
    const modules = [...reachable("index.js")];
    expect(modules.filter((m) => m.startsWith("pkg:") && !m.startsWith("pkg:node:"))).toEqual([]);
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
    expect(Object.keys(root).sort()).toEqual([
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
      "tokenCounterFor",
      "toolOutput",
      "truncateToTokens",
    ]);
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
    expect(Object.keys(store).sort()).toEqual([
      "SESSION_ID_PATTERN",
      "StoreError",
      "memoryStore",
      "postgresStore",
      "sqliteStore",
    ]);
  });
});
