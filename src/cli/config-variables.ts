import { homedir } from "node:os";
import { basename, sep } from "node:path";
import { AgentloopError } from "../core/errors.js";

/**
 * Where the variables of a server entry come from: `${workspaceFolder}` is the working directory
 * (where agentloop runs, as the folder open in VS Code), `${env:NAME}` reads `env`.
 */
export interface VariableSource {
  cwd: string;
  env: NodeJS.ProcessEnv;
}

/** Variables only an editor can fill in (the open file, the selection, a prompt, a command). */
const EDITOR_ONLY =
  /^(input|command|config|workspaceFolder|fileWorkspaceFolder):|^(file|fileWorkspaceFolder|relativeFile|relativeFileDirname|fileBasename|fileBasenameNoExtension|fileExtname|fileDirname|fileDirnameBasename|lineNumber|columnNumber|selectedText|execPath|defaultBuildTask)$/;

/**
 * A server entry with VS Code's variables expanded in every string, as VS Code does in `mcp.json`
 * (`command`, `args`, `env`, `envFile`, `cwd`, `url`, `headers`, ...): `${workspaceFolder}`,
 * `${workspaceFolderBasename}`, `${cwd}`, `${userHome}`, `${env:NAME}` (empty when unset),
 * `${pathSeparator}` and `${/}`. Other `${…}` text is left as written.
 * @throws AgentloopError("config") naming the key for a variable only VS Code can fill in, such
 * as `${input:…}` (a prompt) or `${file}`.
 */
export function expandVariables(
  entry: Record<string, unknown>,
  where: string,
  file: string,
  source: VariableSource,
): Record<string, unknown> {
  const value = (name: string, key: string): string | undefined => {
    switch (name) {
      case "workspaceFolder":
      case "cwd":
        return source.cwd;
      case "workspaceFolderBasename":
        return basename(source.cwd);
      case "userHome":
        return homedir();
      case "pathSeparator":
      case "/":
        return sep;
    }
    if (name.startsWith("env:")) return source.env[name.slice(4)] ?? "";
    if (!EDITOR_ONLY.test(name)) return undefined;
    const fix = name.startsWith("input:")
      ? `agentloop shows no prompts: write the value in its place, or \${env:NAME} to read it from the environment`
      : "only VS Code can fill it in: write the value in its place";
    throw new AgentloopError("config", `'${key}' in ${file} uses \${${name}}: ${fix}.`);
  };
  const expand = (item: unknown, key: string): unknown => {
    if (typeof item === "string")
      return item.includes("${")
        ? item.replace(/\$\{([^{}]*)\}/g, (text, name: string) => value(name, key) ?? text)
        : item;
    if (Array.isArray(item)) return item.map((element, index) => expand(element, `${key}.${index}`));
    if (typeof item === "object" && item !== null)
      return Object.fromEntries(Object.entries(item).map(([k, v]) => [k, expand(v, `${key}.${k}`)]));
    return item;
  };
  return expand(entry, where) as Record<string, unknown>;
}
