import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = join(import.meta.dirname, "..");
const FILES = [
  "README.md",
  ...readdirSync(join(ROOT, "docs"), { recursive: true, encoding: "utf8" })
    .filter((f) => f.endsWith(".md"))
    .map((f) => join("docs", f)),
];

/** GitHub's heading anchor: lowercase, punctuation but '-' and '_' dropped, spaces to '-'. */
const slug = (heading: string) =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}_\- ]/gu, "")
    .replace(/ /g, "-");

/** The anchors of a markdown file: its headings outside code blocks. */
function anchors(text: string): Set<string> {
  const found = new Set<string>();
  let code = false;
  for (const line of text.split("\n")) {
    if (line.startsWith("```")) code = !code;
    const heading = /^#{1,6} (.*)$/.exec(line);
    if (!code && heading) found.add(slug(heading[1] as string));
  }
  return found;
}

/** The relative link targets of a markdown file, code blocks and spans aside. */
function links(text: string): string[] {
  const prose = text.replace(/```[\s\S]*?```/g, "").replace(/`[^`\n]*`/g, "");
  return [...prose.matchAll(/\]\(([^)\s]+)\)/g)]
    .map((m) => m[1] as string)
    .filter((target) => !/^[a-z]+:/i.test(target));
}

describe("the README and docs/", () => {
  it("link only to files and anchors that exist", () => {
    const broken: string[] = [];
    for (const file of FILES) {
      for (const target of links(readFileSync(join(ROOT, file), "utf8"))) {
        const [path, anchor] = target.split("#") as [string, string | undefined];
        const resolved = path === "" ? join(ROOT, file) : join(ROOT, dirname(file), path);
        if (!existsSync(resolved)) broken.push(`${file}: ${target} (no such file)`);
        else if (anchor !== undefined && !anchors(readFileSync(resolved, "utf8")).has(anchor))
          broken.push(`${file}: ${target} (no such anchor)`);
      }
    }
    expect(broken).toEqual([]);
  });
});
