/* biome-ignore-all lint/suspicious/noTemplateCurlyInString: VS Code's own variable syntax */
import { homedir } from "node:os";
import { sep } from "node:path";
import { describe, expect, it } from "vitest";
import { expandVariables } from "./config-variables.js";

const source = { cwd: "/work/project", env: { TOKEN: "t0k", PORT: "8080" } };

describe("expandVariables", () => {
  it("expands every string of an entry, nested ones included, and leaves the rest as written", () => {
    const entry = {
      url: "http://localhost:${env:PORT}/mcp",
      headers: { Authorization: "Bearer ${env:TOKEN}", "X-Missing": "[${env:NOPE}]" },
      roots: ["${workspaceFolder}${/}notes", "${userHome}${pathSeparator}docs"],
      oauth: { scope: "${workspaceFolderBasename} ${cwd}" },
      toolTimeout: 5,
      env: { KEEP: "${NOT_A_VS_CODE_VARIABLE}", N: 2, GONE: null },
    };
    expect(expandVariables(entry, "servers.s", "mcp.json", source)).toEqual({
      url: "http://localhost:8080/mcp",
      headers: { Authorization: "Bearer t0k", "X-Missing": "[]" },
      roots: [`/work/project${sep}notes`, `${homedir()}${sep}docs`],
      oauth: { scope: "project /work/project" },
      toolTimeout: 5,
      env: { KEEP: "${NOT_A_VS_CODE_VARIABLE}", N: 2, GONE: null },
    });
  });

  it("names the key of a variable only VS Code can fill in", () => {
    const expand = (entry: Record<string, unknown>) => () =>
      expandVariables(entry, "servers.s", "mcp.json", source);
    expect(expand({ headers: { "X-Key": "${input:key}" } })).toThrow(
      "'servers.s.headers.X-Key' in mcp.json uses ${input:key}: agentloop shows no prompts",
    );
    expect(expand({ args: ["a", "${config:editor.tabSize}"] })).toThrow(
      "'servers.s.args.1' in mcp.json uses ${config:editor.tabSize}: only VS Code can fill it in",
    );
  });
});
