import { describe, expect, it } from "vitest";
import { assignToolNames, toolNameFor } from "./names.js";

describe("toolNameFor", () => {
  it("makes names valid for providers", () => {
    expect(toolNameFor("read_file")).toBe("read_file");
    expect(toolNameFor("files.read file")).toBe("files_read_file");
    expect(toolNameFor("")).toBe("tool");
    expect(toolNameFor("x".repeat(100))).toHaveLength(64);
  });
});

describe("assignToolNames", () => {
  it("keeps the first name and renames later ones <server>__<tool>", () => {
    const assigned = assignToolNames(
      [
        { server: "a", tool: "search" },
        { server: "b", tool: "search" },
        { server: "b", tool: "calculator" },
        { server: "c", tool: "other" },
      ],
      ["calculator"],
    );
    expect(assigned.map((entry) => entry.name)).toEqual(["search", "b__search", "b__calculator", "other"]);
    expect(assigned[1]?.warning).toBe(
      "MCP tool 'search' of server 'b' is renamed 'b__search': 'search' is already taken by MCP server 'a'.",
    );
    expect(assigned[2]?.warning).toContain("a built-in or local tool");
    expect(assigned[3]?.warning).toBeUndefined();
  });

  it("adds a number when even the prefixed name is taken, within 64 characters", () => {
    const long = "t".repeat(70);
    const assigned = assignToolNames(
      [
        { server: "s", tool: "x" },
        { server: "s", tool: "x" },
        { server: "s", tool: "x" },
        { server: "s", tool: long },
        { server: "s", tool: long },
        { server: "s", tool: long },
      ],
      [],
    );
    const names = assigned.map((entry) => entry.name);
    expect(names.slice(0, 3)).toEqual(["x", "s__x", "s__x_2"]);
    expect(new Set(names).size).toBe(names.length);
    for (const name of names) expect(name).toMatch(/^[a-zA-Z0-9_-]{1,64}$/);
  });
});
