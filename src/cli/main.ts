#!/usr/bin/env node
// Only commander is loaded up front: `--help` and `--version` start as fast as Node itself. Each
// command imports what it needs (providers, MCP, the server) when it runs.
import { readFileSync } from "node:fs";
import { Command, CommanderError, InvalidArgumentError, Option } from "commander";
import { AgentloopError, errorMessage } from "../core/errors.js";
import type { CliFlags } from "./config.js";
import { beforeExit, exitWhenWritten, onStdoutFailure } from "./exit.js";
import { EXIT_CODES, USAGE_ERROR } from "./render.js";
import type { ServeFlags } from "./serve.js";
import type { SessionsFlags } from "./sessions.js";
import { wantsTraces } from "./tracing-env.js";

const positiveInt = (name: string) => (value: string) => {
  const n = Number(value);
  if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n) || n < 1) {
    throw new InvalidArgumentError(`${name} must be a positive integer.`);
  }
  return n;
};
const positiveNumber = (name: string) => (value: string) => {
  const n = Number(value);
  if (value.trim() === "" || !Number.isFinite(n) || n <= 0)
    throw new InvalidArgumentError(`${name} must be a positive number.`);
  return n;
};

/** Seconds of a PostgreSQL lease: renewed every third of it, so below a second it is mostly renewals; above an hour a dead replica's run waits too long. */
const leaseSeconds = (value: string) => {
  const n = Number(value);
  if (value.trim() === "" || !Number.isFinite(n) || n < 1 || n > 3600)
    throw new InvalidArgumentError("--lease must be a number of seconds from 1 to 3600.");
  return n;
};

const port = (value: string) => {
  const n = Number(value);
  if (!/^\d+$/.test(value.trim()) || n > 65535) throw new InvalidArgumentError("--port must be 0-65535.");
  return n;
};

/** `--approve a,b --approve c` as ["a", "b", "c"]. */
const idList = (value: string, previous: string[] | undefined) => [
  ...(previous ?? []),
  ...value
    .split(",")
    .map((id) => id.trim())
    .filter(Boolean),
];

/** The options that act on a run, refused by commands that start none. */
function refuse(flags: CliFlags, command: string, names: readonly (keyof CliFlags)[]): void {
  const given = names.find((name) => flags[name] !== undefined);
  if (given === undefined) return;
  const flag = `--${given.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;
  throw new AgentloopError(
    "usage",
    `${flag} does not apply to agentloop ${command}: use it with run or chat.`,
  );
}

/** `--image` belongs to a prompt, which only `run` takes on its command line. */
function refuseImage(flags: CliFlags, command: string): void {
  if (flags.image === undefined) return;
  throw new AgentloopError("usage", `--image goes with a prompt: use it with agentloop run, not ${command}.`);
}

/** Groups of the options that configure a run; each command shows in its help the groups that apply to it. */
type OptionGroup = "model" | "agent" | "session" | "image" | "json";

/**
 * The options every command takes (SPEC section 4). Those of the groups not in `shown` are
 * accepted but left out of the command's help (a command that starts no run refuses the run
 * options itself, with a line saying where they belong).
 */
function withCommonOptions(command: Command, shown: readonly OptionGroup[]): Command {
  const add = (group: OptionGroup | "all", option: Option) =>
    command.addOption(group === "all" || shown.includes(group) ? option : option.hideHelp());
  const opt = (flags: string, description: string) => new Option(flags, description);
  add("model", opt("--model <id>", "model id (env AGENTLOOP_MODEL)"));
  add(
    "model",
    opt(
      "--base-url <url>",
      "OpenAI-compatible base URL, e.g. http://localhost:11434/v1 (env OPENAI_BASE_URL)",
    ),
  );
  add(
    "model",
    opt("--provider <name>", "model provider (env AGENTLOOP_PROVIDER)").choices([
      "openai",
      "openai-responses",
      "anthropic",
    ]),
  );
  add("all", opt("--config <file>", "config file (default ./agentloop.json when present)"));
  add("agent", opt("--system <text>", "instructions for the agent"));
  add(
    "agent",
    opt("--max-iterations <n>", "model calls before stopping (default 10)").argParser(
      positiveInt("--max-iterations"),
    ),
  );
  add("agent", opt("--mode <mode>", "natural or explicit termination").choices(["natural", "explicit"]));
  add(
    "agent",
    opt("--tool-protocol <protocol>", "native function calling or xml").choices(["native", "xml"]),
  );
  add("all", opt("--no-builtin-tools", "do not offer the built-in tools"));
  add("agent", opt("--timeout <seconds>", "time limit of the run").argParser(positiveNumber("--timeout")));
  add(
    "agent",
    opt("--max-context-tokens <n>", "token budget of every model request").argParser(
      positiveInt("--max-context-tokens"),
    ),
  );
  add(
    "agent",
    opt(
      "--compact",
      'summarise older turns when a request nears the context budget (config "compaction": { "at", "model" })',
    ),
  );
  add(
    "agent",
    opt("--token-budget <n>", "input plus output tokens over the whole run").argParser(
      positiveInt("--token-budget"),
    ),
  );
  add(
    "agent",
    opt("--cost-budget <usd>", "cost limit of the run in USD").argParser(positiveNumber("--cost-budget")),
  );
  add(
    "session",
    opt("--session <id>", "store the conversation under this id and continue it later (agentloop sessions)"),
  );
  add("session", opt("--resume", "continue the session's interrupted run (takes no prompt)"));
  add(
    "session",
    opt("--force", "take the session over from a holder that looks alive (a process on another host)"),
  );
  add(
    "session",
    opt(
      "--approve <ids>",
      "approve calls the session's run waits on: ids, comma-separated, or all (repeatable)",
    ).argParser(idList),
  );
  add(
    "session",
    opt("--deny <ids>", "decline calls the session's run waits on: ids, comma-separated, or all").argParser(
      idList,
    ),
  );
  add("session", opt("--yes", "approve every call that needs approval, without asking"));
  add("agent", opt("--output-schema <file>", "a JSON Schema file: the answer is JSON valid against it"));
  add(
    "image",
    opt("--image <path|url>", "an image sent with the prompt (repeatable)").argParser(
      (value: string, previous?: string[]) => [...(previous ?? []), value],
    ),
  );
  const json =
    command.name() === "tools" ? "print the list as JSON" : "print the event stream as JSON lines on stdout";
  add("json", opt("--json", json));
  add("all", opt("--verbose", "print progress on stderr even when it is not a terminal"));
  return command;
}

function version(): string {
  const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as {
    version: string;
  };
  return pkg.version;
}

async function readStdin(): Promise<string> {
  if (process.stdin.isTTY) return "";
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8").trim();
}

export async function main(argv: readonly string[]): Promise<number> {
  let exitCode = 0;
  // Traces are exported only when an OTLP endpoint is set: the SDK is loaded then only (tracing.ts).
  if (wantsTraces(process.env)) {
    const { startTracing } = await import("./tracing.js");
    const tracing = await startTracing(process.env, (line) => process.stderr.write(`${line}\n`));
    if (tracing) beforeExit(tracing.shutdown);
  }
  const program = new Command("agentloop")
    .description("An agent-loop runtime: a model uses tools in a loop until the task is done.")
    .version(version())
    .exitOverride()
    .showSuggestionAfterError()
    .configureOutput({ outputError: usageLine("agentloop --help") });

  withCommonOptions(program.command("run"), ["model", "agent", "session", "image", "json"])
    .option(
      "--record <file>",
      "record the run's model traffic and tool results (JSON lines) to replay it later",
    )
    .option(
      "--replay <file>",
      "answer the model from a recording, offline (the prompt defaults to the recorded one)",
    )
    .option("--replay-tools", "with --replay: answer the tools from the recording too (no MCP server starts)")
    .option("--replay-lenient", "with --replay: take the recorded responses even for requests that differ")
    .description("run one task; the final answer goes to stdout")
    .argument(
      "[prompt...]",
      "the task (read from stdin when omitted); with --session, the next message (the answer when the agent asked a question); none with --resume, --approve or --deny",
    )
    .action(async (words: string[], flags: CliFlags) => {
      const continuing = flags.resume === true || flags.approve !== undefined || flags.deny !== undefined;
      if ((flags.replayTools || flags.replayLenient) && flags.replay === undefined) {
        throw new AgentloopError(
          "usage",
          `${flags.replayTools ? "--replay-tools" : "--replay-lenient"} goes with --replay <file>: name the recording to replay.`,
        );
      }
      const prompt =
        words.length > 0
          ? words.join(" ")
          : continuing
            ? undefined
            : flags.replay !== undefined
              ? (await import("../record/replay.js")).recordedPrompt(flags.replay)
              : await readStdin();
      const { runCommand } = await import("./run.js");
      exitCode = await runCommand(prompt, flags);
    });

  program
    .command("demo")
    .description("a first run with no API key: a scripted model answers three questions with the real tools")
    .option("--json", "print the event stream as JSON lines on stdout")
    .action(async (flags: { json?: boolean }) => {
      exitCode = await (await import("./demo.js")).demoCommand(flags);
    });

  withCommonOptions(program.command("tools"), ["json"])
    .description("list every tool with its schema")
    .action(async (flags: CliFlags) => {
      refuse(flags, "tools", ["session", "resume", "approve", "deny", "yes"]);
      refuseImage(flags, "tools");
      const { listTools } = await import("./tools.js");
      exitCode = await listTools(flags);
    });

  withCommonOptions(program.command("chat"), ["model", "agent", "session"])
    .option(
      "--record <file>",
      "record the session's model traffic and tool results (JSON lines) to replay it later",
    )
    .description("interactive multi-turn session in the terminal")
    .action(async (flags: CliFlags) => {
      refuseImage(flags, "chat");
      const { chatCommand } = await import("./chat.js");
      exitCode = await chatCommand(flags);
    });

  withCommonOptions(program.command("serve"), ["model", "agent"])
    .description("serve the agent as an OpenAI-compatible model (web chat at /)")
    .option("--port <n>", "port to listen on (0 picks a free one)", port, 8787)
    .option("--host <host>", "interface to bind (use 0.0.0.0 to expose it)", "127.0.0.1")
    .option("--cors <origins>", "comma-separated origins whose web pages may call the API, or *")
    .option(
      "--no-auth",
      "serve beyond loopback without AGENTLOOP_API_KEY (anyone who connects runs the agent)",
    )
    .option(
      "--drain-timeout <s>",
      "seconds requests in flight may take after SIGTERM",
      positiveNumber("--drain-timeout"),
    )
    .option(
      "--lease <s>",
      "PostgreSQL store: seconds a run stays held by a replica that stopped renewing it (1 to 3600, default 30)",
      leaseSeconds,
    )
    .option("--resume-orphans", "resume interrupted runs of the store by themselves (any replica)")
    .option("--no-store", "store no run (default: where run --session stores, .agentloop/agentloop.db)")
    .option(
      "--mcp",
      "serve the agent as an MCP server too, over Streamable HTTP at /mcp (the tool run_agent)",
    )
    .action(async (flags: ServeFlags) => {
      refuse(flags, "serve", ["session", "resume", "approve", "deny", "yes"]);
      refuseImage(flags, "serve");
      const { serveCommand } = await import("./serve.js");
      exitCode = await serveCommand(flags, program.version() ?? "0.0.0");
    });

  const sessions = program
    .command("sessions")
    .description("stored sessions: ls (the default), show <id>, rm <id>");
  const sessionsCommand = (name: string, description: string, isDefault = false) =>
    sessions
      .command(name, { isDefault })
      .description(description)
      .option("--config <file>", 'config file whose "db" names the store (env AGENTLOOP_DB wins)')
      .option("--json", "print JSON");
  sessionsCommand("ls", "list sessions: id, last update, message count, status", true).action(
    async (flags: SessionsFlags) => {
      const { listSessions } = await import("./sessions.js");
      exitCode = await listSessions(flags);
    },
  );
  sessionsCommand("show", "print a session's transcript (--json: its messages)")
    .argument("<id>", "the session")
    .option("--include-media", "with --json: each image's data as stored (a data: URL), not a placeholder")
    .action(async (id: string, flags: SessionsFlags) => {
      const { showSession } = await import("./sessions.js");
      exitCode = await showSession(id, flags);
    });
  sessionsCommand("rm", "delete a session and its runs")
    .argument("<id>", "the session")
    .option("--force", "delete it even while a process that looks alive (on another host) holds it")
    .action(async (id: string, flags: SessionsFlags) => {
      const { removeSession } = await import("./sessions.js");
      exitCode = await removeSession(id, flags);
    });

  const mcp = program
    .command("mcp")
    .description("MCP: serve (the agent as an MCP server), login <server>, prompts");
  mcp
    .command("login")
    .description(
      "sign in to a configured remote MCP server (OAuth) ahead of time; the token is kept per user",
    )
    .argument("<server>", "the server's name in mcpServers")
    .option("--config <file>", "config file (default ./agentloop.json when present)")
    .action(async (server: string, flags: { config?: string }) => {
      const { mcpLogin } = await import("./mcp-login.js");
      exitCode = await mcpLogin(server, flags);
    });

  withCommonOptions(mcp.command("serve"), ["model", "agent", "session"])
    .description(
      "serve the agent as an MCP server on stdio (the tool run_agent), for Claude Desktop, Claude Code, Cursor, VS Code",
    )
    .action(async (flags: CliFlags) => {
      refuse(flags, "mcp serve", ["resume", "approve", "deny", "force", "json"]);
      refuseImage(flags, "mcp serve");
      const { mcpServeCommand } = await import("./mcp-serve.js");
      exitCode = await mcpServeCommand(flags, program.version() ?? "0.0.0");
    });

  mcp
    .command("prompts")
    .description("list the MCP servers' prompts (/name in agentloop chat)")
    .option("--config <file>", "config file (default ./agentloop.json when present)")
    .option("--json", "print JSON")
    .action(async (flags: { config?: string; json?: boolean }) => {
      const { listPrompts } = await import("./tools.js");
      exitCode = await listPrompts(flags);
    });

  for (const command of [...program.commands, ...sessions.commands, ...mcp.commands]) {
    const name = command.parent === program ? command.name() : `${command.parent?.name()} ${command.name()}`;
    command.configureOutput({ outputError: usageLine(`agentloop ${name} --help`) });
  }

  try {
    await program.parseAsync(argv, { from: "user" });
    return exitCode;
  } catch (error) {
    if (error instanceof CommanderError) {
      return error.exitCode === 0 ? 0 : USAGE_ERROR;
    }
    if (error instanceof AgentloopError) {
      process.stderr.write(`agentloop: ${error.message}\n`);
      // Ctrl+C before the run started (e.g. during a sign-in in the browser): the exit of an aborted run.
      return error.code === "aborted" ? EXIT_CODES.aborted : USAGE_ERROR;
    }
    process.stderr.write(`agentloop: unexpected error: ${errorMessage(error)}\n`);
    return 1;
  }
}

/**
 * Commander's errors as one line: "agentloop: unknown option '--foo' (did you mean --bar?). See
 * 'agentloop run --help'."
 */
function usageLine(help: string) {
  return (text: string, write: (text: string) => void) => {
    let line = text
      .replace(/^error: /, "")
      .replace(/\s*\n\(Did you mean (.+)\?\)/, " (did you mean $1?)")
      .trim();
    if (
      /^(unknown option|unknown command|too many arguments|missing required argument|option .* argument missing)/.test(
        line,
      )
    ) {
      line = `${line.replace(/\.$/, "")}. See '${help}'.`;
    }
    write(`agentloop: ${line}\n`);
  };
}

onStdoutFailure();

main(process.argv.slice(2)).then(exitWhenWritten, (error: unknown) => {
  process.stderr.write(`agentloop: unexpected error: ${errorMessage(error)}\n`);
  return exitWhenWritten(1);
});
