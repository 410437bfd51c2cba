// How the `agentloop` process ends: every command through `exitWhenWritten`, a second Ctrl+C
// through `exitNow`. Exiting explicitly matters: a tool that ignored its abort signal or an idle
// keep-alive socket must not hold the process; waiting for the output matters as much: a pipe
// takes 64 KiB, the rest of a long answer waits in the process until the reader takes it.

/** What must finish before the process exits (the traces' flush, bounded in time), once set. */
let flush: (() => Promise<void>) | undefined;

/** Has `exitWhenWritten` await `fn` (which must not reject and must bound its own time) first. */
export function beforeExit(fn: () => Promise<void>): void {
  flush = fn;
}

/** The exit code stdout's failure imposes (see `onStdoutFailure`), once it failed. */
let imposed: number | undefined;

/** Resolves once everything written to `stream` so far has left the process (or cannot: the stream failed). */
function written(stream: NodeJS.WriteStream): Promise<void> {
  if (stream.destroyed || stream.writableEnded) return Promise.resolve();
  // Writes complete in order: an empty write's callback comes after every earlier one.
  return new Promise((resolve) => stream.write("", () => resolve()));
}

/**
 * Ends the process with `code` once stdout and stderr are written out, however slowly their
 * readers read; with the code stdout's failure imposes instead when it failed. Never returns.
 */
export async function exitWhenWritten(code: number): Promise<never> {
  process.exitCode = code;
  const pending = flush;
  flush = undefined;
  if (pending) await pending();
  await written(process.stdout);
  await written(process.stderr);
  // A failed write reports its error a tick after its callback.
  await new Promise((resolve) => setImmediate(resolve));
  return process.exit(imposed ?? code);
}

/** Ends the process with `code` at once, dropping unwritten output (a second Ctrl+C: the person wants out). */
export function exitNow(code: number): never {
  return process.exit(code);
}

/**
 * What a failing stdout does: a reader that went away (`| head`: EPIPE) ends the process quietly
 * with 0, as it has what it asked for; any other failure (ENOSPC on a full disk, EIO) loses the
 * output, so one line on stderr says so and the process exits 1. Either way the command stops:
 * its output has nowhere to go (a session store keeps what was committed, as after a kill).
 */
export function onStdoutFailure(): void {
  // Listening for good: later writes to the failed stream fail too, and must not throw.
  process.stdout.on("error", (error: NodeJS.ErrnoException) => {
    if (imposed !== undefined) return;
    imposed = error.code === "EPIPE" ? 0 : 1;
    if (imposed === 1) {
      const reason = (error.message.split(",")[0] ?? error.message).replace(/^E[A-Z]+: /, "");
      process.stderr.write(
        `agentloop: cannot write to stdout: ${reason}${error.code ? ` (${error.code})` : ""}: the output is lost\n`,
      );
    }
    void exitWhenWritten(imposed);
  });
}
