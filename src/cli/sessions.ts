// `agentloop sessions`: list, show and remove the stored sessions. Reading never creates a store.
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { inCallOrder } from "../agent/state.js";
import { AgentloopError } from "../core/errors.js";
import { describeMedia } from "../core/media.js";
import type { MediaPart, Message } from "../core/messages.js";
import { environmentSecrets, secretRedactor } from "../core/redact.js";
import type { ChildRun } from "../core/run-state.js";
import { configSecrets } from "../mcp/config.js";
import type { SessionStore, SessionSummary } from "../store/types.js";
import { dbSetting, loadConfigFile } from "./config.js";
import { checkSessionId, forcing, storeFailure } from "./session-run.js";
import { isPostgresUrl, openStore } from "./store.js";

export interface SessionsFlags {
  config?: string;
  json?: boolean;
  /** `show --json`: images as stored, not placeholders. */
  includeMedia?: boolean;
  /** `rm`: even while a process that looks alive holds it. */
  force?: boolean;
}

/**
 * The store the settings name (undefined when its file does not exist yet), and what redacts the
 * configured secrets (the environment's keys, the MCP servers') from what is printed: a store
 * written before they were redacted may hold them.
 */
async function existingStore(
  flags: SessionsFlags,
  reading: boolean,
): Promise<{ store: SessionStore | undefined; redact: (json: string) => string }> {
  // Its notes are about MCP servers, which these commands do not start: `run` and `tools` print them.
  const { config, name } = await loadConfigFile(flags.config);
  const secrets = [...environmentSecrets(), ...Object.values(config.mcpServers ?? {}).flatMap(configSecrets)];
  const redactor = secretRedactor(secrets);
  const redact = redactor ? redactor.json : (json: string) => json;
  const db = dbSetting(process.env, config, name);
  if (!isPostgresUrl(db.location) && !existsSync(resolve(db.location))) return { store: undefined, redact };
  return { store: await openStore({ db }, { reading }), redact };
}

/** `reading`: the command only reads, so a store it may not write is opened read-only. */
async function withStore<T>(
  flags: SessionsFlags,
  id: string | undefined,
  use: (store: SessionStore | undefined, redact: (text: string) => string) => Promise<T>,
  reading = true,
): Promise<T> {
  if (id !== undefined) checkSessionId(id, "invalid session id");
  const { store, redact } = await existingStore(flags, reading);
  try {
    return await use(store, redact);
  } catch (error) {
    throw storeFailure(error, id ?? "");
  } finally {
    await store?.close().catch(() => {});
  }
}

const noSession = (id: string) =>
  new AgentloopError("usage", `no session '${id}' in the store: agentloop sessions lists them`);

/** `completed final_answer`, `waiting (approval)`, `interrupted`, ... */
function statusText(summary: SessionSummary): string {
  if (summary.status === "completed") return `completed ${summary.stopReason ?? ""}`.trim();
  if (summary.status === "waiting") {
    if (summary.stopReason === "approval_required") return "waiting (approval)";
    return summary.stopReason === "tool_calls" ? "waiting (tool results)" : "waiting (answer)";
  }
  return summary.status;
}

const when = (ms: number) => {
  const d = new Date(ms);
  const pad = (n: number) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
};

/** `agentloop sessions [ls]`: most recently updated first. */
export async function listSessions(flags: SessionsFlags): Promise<number> {
  const list = await withStore(flags, undefined, async (store) => (store ? store.list() : []));
  if (flags.json) {
    const rows = list.map((s) => ({
      id: s.id,
      createdAt: new Date(s.createdAt).toISOString(),
      updatedAt: new Date(s.updatedAt).toISOString(),
      messageCount: s.messageCount,
      status: s.status,
      ...(s.stopReason !== undefined && { stopReason: s.stopReason }),
      ...(s.lastRunId !== undefined && { lastRunId: s.lastRunId }),
    }));
    process.stdout.write(`${JSON.stringify(rows, null, 2)}\n`);
    return 0;
  }
  if (list.length === 0) {
    process.stderr.write('agentloop: no sessions yet: agentloop run --session <id> "<prompt>" starts one\n');
    return 0;
  }
  const rows = [
    ["ID", "UPDATED", "MESSAGES", "STATUS"],
    ...list.map((s) => [s.id, when(s.updatedAt), String(s.messageCount), statusText(s)]),
  ];
  const widths = [0, 1, 2].map((i) => Math.max(...rows.map((r) => (r[i] as string).length)));
  for (const row of rows) {
    const cells = row.map((cell, i) => (i < 3 ? cell.padEnd(widths[i] as number) : cell));
    process.stdout.write(`${cells.join("  ")}\n`);
  }
  return 0;
}

/**
 * `agentloop sessions show <id>`: the transcript, each reply's tool results in call order. With
 * `--json` the messages, each image's `url` its placeholder (`[image: image/png, 2.1 KB]`) unless
 * `--include-media` asks for the data.
 */
export async function showSession(id: string, flags: SessionsFlags): Promise<number> {
  const read = await withStore(flags, id, async (store, redact) => {
    const stored = await store?.read(id);
    return stored && { stored, redact };
  });
  if (!read) throw noSession(id);
  const { stored, redact } = read;
  const messages = inCallOrder(stored.messages);
  // The last run's sub-agents (SPEC section 10), each under the reply whose call started it.
  const children = (stored.lastRun?.state as { children?: ChildRun[] } | undefined)?.children ?? [];
  if (flags.json) {
    const shown = withRuns(flags.includeMedia ? messages : messages.map(withPlaceholders), children, flags);
    process.stdout.write(`${redact(JSON.stringify(shown, null, 2))}\n`);
    return 0;
  }
  const { summary } = stored;
  process.stdout.write(
    `# session ${id} · ${summary.messageCount} messages · ${statusText(summary)} · updated ${when(summary.updatedAt)}\n`,
  );
  for (const line of transcript(messages, children, "")) process.stdout.write(`${redact(line)}\n`);
  return 0;
}

/** The transcript's lines, each child run's indented under the call that started it. */
function transcript(messages: readonly Message[], children: readonly ChildRun[], pad: string): string[] {
  const lines: string[] = [];
  for (const message of messages) {
    if (message.role !== "assistant" || !message.toolCalls?.length || children.length === 0) {
      lines.push(indent(`${pad}${transcriptLines(message)}`, pad));
      continue;
    }
    if (message.content) lines.push(indent(`${pad}${transcriptLines({ ...message, toolCalls: [] })}`, pad));
    for (const call of message.toolCalls) {
      lines.push(`${pad}${transcriptLines({ ...message, content: "", toolCalls: [call] })}`);
      const child = children.find((c) => c.parentCallId === call.id);
      if (!child) continue;
      const { state } = child;
      const how = state.stopReason ? `${state.status} ${state.stopReason}` : "interrupted";
      lines.push(`${pad}    [${child.agent} · ${state.runId} · ${how}]`);
      lines.push(...transcript(state.messages, state.children ?? [], `${pad}    `));
    }
  }
  return lines;
}

/**
 * `--json`: the messages, each reply that started sub-agents with `runs`: each child run with its
 * `runId`, `parentRunId`, `parentCallId`, `agent`, `depth`, status, and messages (the same way down).
 */
function withRuns(messages: Message[], children: readonly ChildRun[], flags: SessionsFlags): unknown[] {
  if (children.length === 0) return messages;
  return messages.map((message) => {
    if (message.role !== "assistant" || !message.toolCalls) return message;
    const ids = new Set(message.toolCalls.map((call) => call.id));
    const runs = children
      .filter((child) => ids.has(child.parentCallId))
      .map(({ agent, parentRunId, parentCallId, depth, state }) => {
        const own = flags.includeMedia ? state.messages : state.messages.map(withPlaceholders);
        return {
          runId: state.runId,
          parentRunId,
          parentCallId,
          agent,
          depth,
          status: state.status,
          ...(state.stopReason !== undefined && { stopReason: state.stopReason }),
          usage: state.usage,
          messages: withRuns(own, state.children ?? [], flags),
        };
      });
    return runs.length > 0 ? { ...message, runs } : message;
  });
}

/** The message with each image's `url` replaced by its placeholder; the same shape otherwise. */
function withPlaceholders(message: Message): Message {
  if (message.role === "assistant" || !message.media?.length) return message;
  return { ...message, media: message.media.map((part) => ({ type: part.type, url: describeMedia(part) })) };
}

const indent = (text: string, by: string) => text.replace(/\n/g, `\n${by}`);

/** Images in a transcript: each as its placeholder (`[image: image/png, 2.1 KB]`), never its bytes. */
const mediaNotes = (media: readonly MediaPart[] | undefined) =>
  media?.length ? ` ${media.map(describeMedia).join(" ")}` : "";

function transcriptLines(message: Message): string {
  switch (message.role) {
    case "user": {
      const { compaction } = message;
      if (compaction) {
        // The log keeps what was replaced; from here on the runs went on from this summary.
        const mark = `── compacted: ${compaction.replaced} earlier messages summarised (the ${compaction.kept} before this line kept) ──`;
        return `${mark}\nsummary: ${indent(message.content, "         ")}`;
      }
      return `user: ${indent(message.content, "      ")}${mediaNotes(message.media)}`;
    }
    case "assistant": {
      const lines =
        message.content || !message.toolCalls?.length
          ? [`assistant: ${indent(message.content, "           ")}`]
          : [];
      for (const call of message.toolCalls ?? [])
        lines.push(`  → ${call.name} ${call.arguments}  (${call.id})`);
      return lines.join("\n");
    }
    case "tool":
      return `  ${message.isError ? "✗" : "←"} ${message.name}: ${indent(message.content, "    ")}${mediaNotes(message.media)}`;
    default:
      return "";
  }
}

/** `agentloop sessions rm <id>`: the session and its runs. */
export async function removeSession(id: string, flags: SessionsFlags): Promise<number> {
  const options = flags.force ? forcing(id, "removes it") : undefined;
  const removed = await withStore(
    flags,
    id,
    async (store) => (store ? store.remove(id, options) : false),
    false,
  );
  if (!removed) throw noSession(id);
  process.stdout.write(flags.json ? `${JSON.stringify({ removed: id })}\n` : `Removed session '${id}'.\n`);
  return 0;
}
