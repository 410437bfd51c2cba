import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, expectTypeOf, it } from "vitest";
import { AgentloopError, type AgentloopErrorCode } from "../src/core/errors.js";
import type { TokenStoreErrorCode } from "../src/mcp/oauth-store.js";
import type { StoreErrorCode } from "../src/store/types.js";

const ROOT = join(import.meta.dirname, "..");
const read = (path: string) => readFileSync(join(ROOT, path), "utf8");

/** The codes of a `type X = | "a" | "b";` union, read from its source file. */
function unionCodes(path: string, name: string): string[] {
  const source = read(path);
  const start = source.indexOf(`export type ${name} =`);
  const body = source.slice(start, source.indexOf(";", start));
  return [...body.matchAll(/\|\s*"([a-z_]+)"/g)].map((m) => m[1] as string);
}

/** The codes of the rows of the table under `heading` in docs/errors.md. */
function documented(heading: string): string[] {
  const doc = read("docs/errors.md");
  const section = doc.slice(doc.indexOf(heading)).split("\n## ")[0] as string;
  return [...section.matchAll(/^\| `([a-z_]+)` \|/gm)].map((m) => m[1] as string);
}

function sources(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && e.name.endsWith(".ts") && !e.name.endsWith(".test.ts"))
    .map((e) => join(e.parentPath, e.name));
}

describe("error codes", () => {
  it("are a union type on each error class", () => {
    expectTypeOf(new AgentloopError("usage", "x").code).toEqualTypeOf<AgentloopErrorCode>();
    expectTypeOf<AgentloopErrorCode>().not.toEqualTypeOf<string>();
    expectTypeOf<TokenStoreErrorCode>().not.toEqualTypeOf<string>();
    expectTypeOf<StoreErrorCode>().not.toEqualTypeOf<string>();
  });

  it("are each documented in docs/errors.md, linked from the README", () => {
    expect(documented("## `AgentloopError`")).toEqual(unionCodes("src/core/errors.ts", "AgentloopErrorCode"));
    expect(documented("## `StoreError`")).toEqual(unionCodes("src/store/types.ts", "StoreErrorCode"));
    expect(documented("## `TokenStoreError`")).toEqual(
      unionCodes("src/mcp/oauth-store.ts", "TokenStoreErrorCode"),
    );
    expect(read("README.md")).toContain("(docs/errors.md)");
  });

  it("thrown in src are all in the union (none thrown is undocumented)", () => {
    const union = new Set<string>(unionCodes("src/core/errors.ts", "AgentloopErrorCode"));
    const thrown = new Set<string>();
    for (const file of sources("src")) {
      for (const m of readFileSync(file, "utf8").matchAll(/new AgentloopError\(\s*"([a-z_]+)"/g)) {
        thrown.add(m[1] as string);
      }
    }
    expect(thrown.size).toBeGreaterThan(5);
    for (const code of thrown) expect(union).toContain(code);
  });
});
