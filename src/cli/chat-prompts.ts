// MCP prompts as chat commands: `/name key=value ...`, with the arguments not given asked for.
import { errorMessage } from "../core/errors.js";
import type { McpPromptInfo } from "../mcp/client.js";

/** The chat's own commands: a prompt by one of these names is reached as `/<server>__<name>`. */
const CHAT_COMMANDS = ["help", "reset", "tools", "resume", "exit", "quit"] as const;

/** The command that runs a prompt, without the slash. */
function promptCommand(prompt: McpPromptInfo): string {
  return (CHAT_COMMANDS as readonly string[]).includes(prompt.name)
    ? `${prompt.server}__${prompt.name}`
    : prompt.name;
}

/** `/name city=… [state=…]`: how a prompt is used, for /help. */
export function promptUsage(prompt: McpPromptInfo): string {
  const args = prompt.arguments.map((a) => (a.required ? `${a.name}=…` : `[${a.name}=…]`));
  return [`/${promptCommand(prompt)}`, ...args].join(" ");
}

export type PromptLine =
  | { prompt: McpPromptInfo; args: Record<string, string> }
  | { prompt: McpPromptInfo; error: string };

/**
 * The prompt a chat line names with the arguments it gives (`key=value`, values in "…" or '…'
 * may hold spaces), or undefined when the line names no prompt.
 */
export function parsePromptLine(line: string, prompts: readonly McpPromptInfo[]): PromptLine | undefined {
  const match = /^\/(\S+)\s*(.*)$/s.exec(line);
  const prompt = match && prompts.find((p) => promptCommand(p) === match[1]);
  if (!match || !prompt) return undefined;
  const args: Record<string, string> = {};
  let rest = match[2] ?? "";
  const pair = /^([^\s=]+)=(?:"([^"]*)"|'([^']*)'|(\S*))\s*/;
  while (rest !== "") {
    const found = pair.exec(rest);
    if (!found) return { prompt, error: `give the arguments as key=value: ${promptUsage(prompt)}` };
    const [all, key = "", double, single, plain] = found;
    if (!prompt.arguments.some((a) => a.name === key)) {
      const known = prompt.arguments.map((a) => a.name).join(", ") || "none";
      return {
        prompt,
        error: `/${promptCommand(prompt)} has no argument '${key}' (its arguments: ${known})`,
      };
    }
    args[key] = double ?? single ?? plain ?? "";
    rest = rest.slice(all.length);
  }
  return { prompt, args };
}

/**
 * Asks for the arguments a line did not give: every one when it gave none, else the required
 * ones still missing. Undefined when the person stopped answering (Ctrl+C or end of input).
 */
async function askArguments(
  prompt: McpPromptInfo,
  given: Record<string, string>,
  ask: (question: string) => Promise<string | undefined>,
  write: (text: string) => void,
): Promise<Record<string, string> | undefined> {
  const args = { ...given };
  const none = Object.keys(given).length === 0;
  for (const argument of prompt.arguments) {
    if (args[argument.name] !== undefined || (!none && !argument.required)) continue;
    for (;;) {
      const about = argument.description ? ` – ${argument.description}` : "";
      const answer = await ask(
        `  ${argument.name}${about} (${argument.required ? "required" : "optional"}): `,
      );
      if (answer === undefined) return undefined;
      const value = answer.trim();
      if (value !== "") args[argument.name] = value;
      else if (argument.required) {
        write(`  ${argument.name} is required.\n`);
        continue;
      }
      break;
    }
  }
  return args;
}

/** The required arguments a line left out. */
function missingArguments(prompt: McpPromptInfo, args: Record<string, string>): string[] {
  return prompt.arguments.filter((a) => a.required && (args[a.name] ?? "") === "").map((a) => a.name);
}

/**
 * The text of the MCP prompt a line names, its missing arguments asked for (when a person can
 * answer); undefined (with a line) when it cannot be had.
 */
export async function expandPrompt(
  named: PromptLine,
  io: {
    /** A person answers at the terminal. */
    interactive: boolean;
    ask: (question: string) => Promise<string | undefined>;
    write: (text: string) => void;
    dim: (text: string) => string;
    getPrompt: (name: string, args: Record<string, string>) => Promise<string>;
  },
): Promise<string | undefined> {
  const { write, dim } = io;
  if ("error" in named) {
    write(`${dim(`(${named.error})`)}\n`);
    return undefined;
  }
  const { prompt } = named;
  const args = io.interactive ? await askArguments(prompt, named.args, io.ask, write) : named.args;
  if (!args) return undefined;
  const missing = missingArguments(prompt, args);
  if (missing.length > 0) {
    write(`${dim(`(/${promptCommand(prompt)} needs ${missing.join(", ")}: ${promptUsage(prompt)})`)}\n`);
    return undefined;
  }
  try {
    return await io.getPrompt(prompt.name, args);
  } catch (error) {
    write(`${dim(`(${errorMessage(error)})`)}\n`);
    return undefined;
  }
}
