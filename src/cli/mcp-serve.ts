import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import type { SessionStore } from "../store/types.js";
import { settingsFrom, setupAgent } from "./compose.js";
import type { CliFlags } from "./config.js";
import { cliElicitation } from "./elicitation.js";
import { interruptible, STOP_SIGNALS } from "./interrupt.js";
import { agentMcpServer, storeSessions } from "./mcp-agent.js";
import { checkSessionId } from "./session-run.js";
import { openStore } from "./store.js";

/**
 * `agentloop mcp serve`: the agent as an MCP server on stdio (SPEC section 14), built as `run`
 * builds it (`--config` and every run option). stdout carries MCP messages and nothing else:
 * every note, warning and log goes to stderr. Serves until stdin ends or a signal; resolves to
 * the exit code (0).
 */
export async function mcpServeCommand(flags: CliFlags, version: string): Promise<number> {
  // A stray console.log anywhere (a dependency's) would corrupt the protocol: stderr it is.
  console.log = console.info = console.debug = console.warn = console.error;
  if (flags.session !== undefined) checkSessionId(flags.session);
  const settings = await settingsFrom(flags);
  const onElicitation = cliElicitation({
    mode: settings.elicitation,
    yes: flags.yes === true,
    note: (line) => process.stderr.write(`${line}\n`),
    hint: `agentloop mcp serve cannot ask anyone for it (set "elicitation": "accept-defaults" in ${settings.configFile ?? "agentloop.json"} to accept forms whose required fields have defaults)`,
  });
  const { agent, close } = await interruptible(
    (signal) =>
      setupAgent(flags, {
        settings,
        catalogueNotes: false,
        onElicitation,
        signal,
        ...(flags.yes && { onApproval: () => "approve" as const }),
      }),
    (made) => made.close(),
  );
  const log = (line: string) => process.stderr.write(`agentloop: ${line}\n`);
  // The store run --session uses, opened by the first call that names a session, kept until the end.
  let store: Promise<SessionStore> | undefined;
  const server = agentMcpServer({
    agent,
    sessions: storeSessions(() => {
      // A store that could not be opened (a PostgreSQL server down) is tried again by the next call.
      store ??= openStore(settings).catch((error: unknown) => {
        store = undefined;
        throw error;
      });
      return store;
    }, "no store"),
    version,
    ...(flags.session !== undefined && { defaultSession: flags.session }),
    log,
  });
  server.server.onerror = (error) => log(`MCP: ${error.message}`);
  const transport = new StdioServerTransport();
  try {
    await server.connect(transport);
    if (flags.verbose) log(`serving ${agent.options.model.id} over MCP on stdio (tool run_agent)`);
    // The client is gone when stdin ends; a signal stops too, and so does the transport closing
    // (the SDK closes it on a message over its 10 MB limit). Closing aborts the runs in flight.
    await new Promise<void>((resolve) => {
      const stop = () => resolve();
      server.server.onclose = stop;
      process.stdin.once("end", stop);
      process.stdin.once("close", stop);
      for (const signal of STOP_SIGNALS) process.once(signal, stop);
    });
  } finally {
    await server.close().catch(() => {});
    await close();
    await store?.then((opened) => opened.close()).catch(() => {});
  }
  return 0;
}
