/**
 * A run recorded at its HTTP boundary, as JSON lines (SPEC section 12): a header, then each model
 * call's request body and response (whole, or its server-sent events raw) and each tool call's
 * result, in the order they happened, sub-agents' included. This module writes and reads the
 * file; record/http.ts is the fetch that records and the one that replays.
 */
import { openSync, readFileSync, writeSync } from "node:fs";
import { AgentloopError } from "../core/errors.js";
import { isObject } from "../core/json.js";
import { environmentSecrets, secretRedactor } from "../core/redact.js";

const RECORDING_FORMAT = "agentloop-recording";
const RECORDING_VERSION = 1;

/** The API families a recording can hold, as `--provider` names them. */
export type RecordedProvider = "openai" | "openai-responses" | "anthropic";

export interface RecordingHeader {
  type: "header";
  format: typeof RECORDING_FORMAT;
  version: number;
  agentloop: string;
  provider: RecordedProvider;
  model: string;
  /** Where the first request went, its API path left out: a replay's model has the same base URL (its price, its traces). */
  baseURL?: string;
}

/** A whole response, or a stream's events (`event` when the event had that line; `data` raw). */
export type RecordedResponse =
  | { status: number; contentType: string; body: string }
  | { status: number; contentType: string; events: { event?: string; data: string }[] };

interface ModelEntry {
  type: "model";
  request: Record<string, unknown>;
  response: RecordedResponse;
}

export interface ToolEntry {
  type: "tool";
  id: string;
  name: string;
  /** The parsed arguments, as in `tool_call`. */
  arguments: Record<string, unknown>;
  content: string;
  isError: boolean;
}

export interface Recording {
  header: RecordingHeader;
  models: ModelEntry[];
  tools: ToolEntry[];
}

/** The API family of a request by its URL's path; undefined for anything else (an MCP server's HTTP). */
export function providerOf(url: string): RecordedProvider | undefined {
  const path = url.replace(/[?#].*$/, "");
  if (path.endsWith("/chat/completions")) return "openai";
  if (path.endsWith("/responses")) return "openai-responses";
  if (path.endsWith("/messages")) return "anthropic";
  return undefined;
}

function packageVersion(): string {
  try {
    const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as {
      version?: string;
    };
    return pkg.version ?? "unknown";
  } catch {
    return "unknown";
  }
}

/**
 * Where a recording goes: one file, shared by every agent that records into it (a run's sub-agents
 * too), written in the order things happen. A model call's entry takes its place when its request
 * is sent and is written once its response has been read, so the entries after it wait for it.
 */
export class RecordingFile {
  private readonly fd: number;
  private header: RecordingHeader | undefined;
  /** Entries not written yet, in order; a model call's `entry` is unset while its response is read. */
  private readonly queue: { entry: object | undefined }[] = [];
  private readonly redact: ((json: string) => string) | undefined;

  /**
   * Creates (or empties) `file` at once, so a file that cannot be written says so before any run.
   * `secrets` (and the API keys of the environment) never reach it: each becomes `[REDACTED]`.
   * @throws AgentloopError("invalid_option") naming the file and why it cannot be written.
   */
  constructor(
    readonly file: string,
    secrets: readonly string[] = [],
  ) {
    try {
      this.fd = openSync(file, "w", 0o600);
    } catch (error) {
      const reason = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
      throw new AgentloopError(
        "invalid_option",
        `Cannot write the recording ${file} (${reason}): name a file in a folder you can write to.`,
      );
    }
    this.redact = secretRedactor([...environmentSecrets(), ...secrets])?.json;
  }

  /** A model call starts: its slot, filled by the returned function. */
  model(url: string, request: Record<string, unknown>): (response: RecordedResponse) => void {
    if (!this.header) {
      this.header = {
        type: "header",
        format: RECORDING_FORMAT,
        version: RECORDING_VERSION,
        agentloop: packageVersion(),
        provider: providerOf(url) ?? "openai",
        model: typeof request.model === "string" ? request.model : "",
        baseURL: url.replace(/[?#].*$/, "").replace(/\/(chat\/completions|responses|messages)$/, ""),
      };
      this.write(this.header);
    }
    const slot: { entry: object | undefined } = { entry: undefined };
    this.queue.push(slot);
    return (response) => {
      slot.entry = { type: "model", request, response } satisfies ModelEntry;
      this.flush();
    };
  }

  tool(entry: Omit<ToolEntry, "type">): void {
    this.queue.push({ entry: { type: "tool", ...entry } });
    this.flush();
  }

  /** Writes the entries that are complete, up to the first that is not. */
  private flush(): void {
    let done = 0;
    for (const { entry } of this.queue) {
      if (entry === undefined) break;
      this.write(entry);
      done++;
    }
    this.queue.splice(0, done);
  }

  private write(entry: object): void {
    const line = JSON.stringify(entry);
    writeSync(this.fd, `${this.redact ? this.redact(line) : line}\n`);
  }
}

/** One line naming what is wrong with a recording file and what to do. */
const bad = (file: string, what: string) => new AgentloopError("invalid_option", `${file} ${what}`);

/**
 * Reads and checks a recording.
 * @throws AgentloopError("invalid_option"), one line: a file that cannot be read, is not a
 * recording, is of a newer format version, or is cut off mid-line.
 */
export function readRecording(file: string): Recording {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
    throw bad(file, `cannot be read (${reason}): name a recording made with --record.`);
  }
  if (text.length > 0 && !text.endsWith("\n")) {
    throw bad(file, "is cut off mid-line (its last line is incomplete): record the run again.");
  }
  const lines = text.split("\n");
  lines.pop();
  const entries: unknown[] = [];
  for (const [i, line] of lines.entries()) {
    try {
      entries.push(JSON.parse(line));
    } catch {
      throw bad(
        file,
        i === 0
          ? "is not an agentloop recording (its first line is not JSON): name a file made with --record."
          : `has a line that is not JSON (line ${i + 1}): record the run again.`,
      );
    }
  }
  const header = entries[0];
  if (!isObject(header) || header.type !== "header" || header.format !== RECORDING_FORMAT) {
    throw bad(file, "is not an agentloop recording (no recording header): name a file made with --record.");
  }
  if (typeof header.version !== "number" || header.version > RECORDING_VERSION) {
    throw bad(
      file,
      `is a recording of format version ${String(header.version)}, newer than this agentloop reads (${RECORDING_VERSION}): upgrade agentloop-runtime.`,
    );
  }
  const models: ModelEntry[] = [];
  const tools: ToolEntry[] = [];
  for (const entry of entries.slice(1)) {
    if (isObject(entry) && entry.type === "model") models.push(entry as unknown as ModelEntry);
    else if (isObject(entry) && entry.type === "tool") tools.push(entry as unknown as ToolEntry);
  }
  return { header: header as unknown as RecordingHeader, models, tools };
}
