// Vitest's global setup: every temporary file of a test run (the tests' own, and those of the
// processes they start: CLIs, servers, MCP servers, browsers, database clusters) goes in one
// folder, removed when the run ends. Nothing is left in the system's temp folder, whichever test
// forgets to remove what it made, and a run killed halfway leaves one folder to find.
import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export default function setup(): () => void {
  const dir = mkdtempSync(join(tmpdir(), "agentloop-tests-"));
  // Others may pass through (not list it): a PostgreSQL cluster run as nobody lives inside.
  chmodSync(dir, 0o711);
  // Read by os.tmpdir() in the test workers and every child process (they inherit the environment).
  process.env.TMPDIR = dir;
  return () => rmSync(dir, { recursive: true, force: true });
}
