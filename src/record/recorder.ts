/**
 * Recording a run (SPEC section 12): `recorder(file)` is what an agent's `record` option makes, or
 * what several agents share (a run's sub-agents write into one file, in order).
 */
import { recordingFetch } from "./http.js";
import { RecordingFile, type ToolEntry } from "./recording.js";

export interface Recorder {
  readonly file: string;
  /** The fetch a model sends its requests through to have them recorded (see `Model.withFetch`). */
  readonly fetch: typeof fetch;
  /** Records a tool call's result, as the run records it. */
  tool(entry: Omit<ToolEntry, "type">): void;
}

/**
 * A recorder writing to `file` (created, or emptied, now). `secrets` (and the environment's API
 * keys) are written as `[REDACTED]`; request headers are never written.
 * @throws AgentloopError("invalid_option") when the file cannot be written.
 */
export function recorder(file: string, options: { secrets?: readonly string[] } = {}): Recorder {
  const out = new RecordingFile(file, options.secrets);
  return {
    file,
    fetch: recordingFetch(out),
    tool: (entry) => out.tool(entry),
  };
}
