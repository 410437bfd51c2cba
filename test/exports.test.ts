import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";

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

describe("public surface", () => {
  it("keeps the root export free of provider SDKs, the CLI and test helpers", () => {
    const modules = [...reachable("index.js")];
    expect(modules.filter((m) => m.startsWith("pkg:") && !m.startsWith("pkg:node:")).sort()).toEqual([
      "pkg:zod",
    ]);
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
    const root = await import("agentloop");
    expect(Object.keys(root).sort()).toEqual([
      "Agent",
      "AgentloopError",
      "DEFAULTS",
      "DEFAULT_PRICES",
      "RUN_STATE_VERSION",
      "RunHandle",
      "Session",
      "contextManager",
      "contextWindowFor",
      "defineTool",
      "tokenCounterFor",
      "truncateToTokens",
    ]);
    const testing = await import("agentloop/testing");
    expect(typeof testing.scriptedModel).toBe("function");
    expect(typeof testing.startFakeOpenAIServer).toBe("function");
    const openai = await import("agentloop/openai");
    expect(typeof openai.openAIChatModel).toBe("function");
    const anthropic = await import("agentloop/anthropic");
    expect(typeof anthropic.anthropicModel).toBe("function");
    expect(typeof testing.startFakeAnthropicServer).toBe("function");
    const mcp = await import("agentloop/mcp");
    expect(typeof mcp.connectMcpServers).toBe("function");
    const store = await import("agentloop/store");
    expect(Object.keys(store).sort()).toEqual([
      "SESSION_ID_PATTERN",
      "StoreError",
      "memoryStore",
      "postgresStore",
      "sqliteStore",
    ]);
  });
});
