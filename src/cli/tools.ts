import type { McpPromptInfo } from "../mcp/index.js";
import { type LoadedTools, loadTools, settingsFrom } from "./compose.js";
import type { CliFlags } from "./config.js";
import { interruptible } from "./interrupt.js";

/**
 * `agentloop tools`: every tool with its schema, then the MCP servers' prompts. With `--json`,
 * stdout is a JSON array of the tools only, `{ name, source, description, parameters }` each (the
 * shape it always had); the prompts are `agentloop mcp prompts --json`.
 */
export async function listTools(flags: CliFlags): Promise<number> {
  return withLoaded(flags, true, (loaded) => {
    const sources = loaded.sources();
    const tools = loaded.tools().map(({ name, description, parameters }, i) => ({
      name,
      source: sources[i] ?? "local",
      description,
      parameters,
    }));
    if (flags.json) {
      process.stdout.write(`${JSON.stringify(tools, null, 2)}\n`);
      return;
    }
    for (const t of tools) {
      process.stdout.write(
        `${t.name} (${t.source})\n  ${t.description}\n  ${JSON.stringify(t.parameters)}\n`,
      );
    }
    const prompts = loaded.prompts();
    if (prompts.length > 0) process.stdout.write("\nPrompts (/name in agentloop chat):\n");
    writePrompts(prompts);
  });
}

/**
 * `agentloop mcp prompts`: the MCP servers' prompts (`/name` in agentloop chat). With `--json`, a
 * JSON array of `{ name, source, description, arguments: [{ name, description?, required }] }`.
 */
export async function listPrompts(flags: { config?: string; json?: boolean }): Promise<number> {
  const settings = { ...flags, builtinTools: false };
  return withLoaded(settings, false, (loaded) => {
    const prompts = loaded.prompts();
    if (flags.json) {
      const listed = prompts.map((p) => ({
        name: p.name,
        source: `mcp:${p.server}`,
        description: p.description ?? p.title ?? "",
        arguments: p.arguments,
      }));
      process.stdout.write(`${JSON.stringify(listed, null, 2)}\n`);
      return;
    }
    if (prompts.length === 0) process.stderr.write("agentloop: no MCP server offers prompts.\n");
    writePrompts(prompts);
  });
}

/**
 * Starts the tools of the config (Ctrl+C gives up, a sign-in in the browser included), uses them,
 * closes them. `catalogueNotes`: see `loadTools`.
 */
async function withLoaded(
  flags: CliFlags,
  catalogueNotes: boolean,
  use: (loaded: LoadedTools) => void,
): Promise<number> {
  const settings = await settingsFrom(flags);
  const loaded = await interruptible(
    (signal) => loadTools(settings, { verbose: flags.verbose === true, signal, catalogueNotes }),
    (made) => made.close(),
  );
  try {
    use(loaded);
    return 0;
  } finally {
    await loaded.close();
  }
}

function writePrompts(prompts: McpPromptInfo[]): void {
  for (const p of prompts) {
    const args = p.arguments.map((a) => `${a.name}${a.required ? "" : "?"}`).join(" ");
    const description = p.description ?? p.title ?? "";
    process.stdout.write(`/${p.name}${args ? ` ${args}` : ""} (mcp:${p.server})\n  ${description}\n`);
  }
}
