// Reading a config file without surprises: at most 1 MiB (so /dev/zero is refused, not read
// forever), a directory named, a FIFO read without waiting for a writer, a UTF-8 BOM dropped.
import { closeSync, constants, fstatSync, openSync, readSync } from "node:fs";
import { Socket } from "node:net";
import { AgentloopError, errorMessage } from "../core/errors.js";

/** A config file (and an `envFile`) larger than this is refused rather than read. */
const MAX_CONFIG_BYTES = 1024 * 1024;

/**
 * The text of a config file, at most MAX_CONFIG_BYTES, without a UTF-8 BOM; undefined when it
 * does not exist and need not (`mustExist` false). `name` is how messages call it.
 * @throws AgentloopError("config") with one line naming the file.
 */
export async function readConfigText(
  path: string,
  name: string,
  mustExist: boolean,
): Promise<string | undefined> {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT" && !mustExist) return undefined;
    if (code === "ENOENT")
      throw new AgentloopError("config", `Config file not found: ${name}. Check the --config path.`);
    throw new AgentloopError(
      "config",
      `Cannot read ${name} (${code ?? (error as Error).message}). Check the --config path.`,
    );
  }
  const stat = fstatSync(fd);
  if (stat.isFIFO() || stat.isSocket()) return text(await readPipe(fd, name));
  try {
    return text(readFd(fd, name));
  } finally {
    closeSync(fd);
  }
}

/** The same for a regular file only (an `envFile`), which must exist. */
export function readConfigTextSync(path: string, name: string): string {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (error) {
    throw new AgentloopError(
      "config",
      `Cannot read ${name}: ${(error as NodeJS.ErrnoException).code ?? "error"}.`,
    );
  }
  try {
    return text(readFd(fd, name));
  } finally {
    closeSync(fd);
  }
}

function readFd(fd: number, name: string): Buffer {
  if (fstatSync(fd).isDirectory())
    throw new AgentloopError("config", `${name} is a directory: pass a JSON file.`);
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    while (size <= MAX_CONFIG_BYTES) {
      const chunk = Buffer.allocUnsafe(64 * 1024);
      const n = readSync(fd, chunk, 0, chunk.length, null);
      if (n === 0) break;
      chunks.push(chunk.subarray(0, n));
      size += n;
    }
  } catch (error) {
    throw new AgentloopError(
      "config",
      `Cannot read ${name} (${(error as NodeJS.ErrnoException).code}): pass a JSON file.`,
    );
  }
  if (size > MAX_CONFIG_BYTES) throw tooLarge(name);
  return Buffer.concat(chunks, size);
}

/**
 * A FIFO or socket. Without a writer a FIFO reads as empty at once (epoll would wait for one
 * forever); with one, its data is awaited.
 */
async function readPipe(fd: number, name: string): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  const add = (chunk: Buffer) => {
    size += chunk.length;
    chunks.push(chunk);
    if (size > MAX_CONFIG_BYTES) throw tooLarge(name);
  };
  try {
    while (true) {
      const chunk = Buffer.allocUnsafe(64 * 1024);
      const n = readSync(fd, chunk, 0, chunk.length, null);
      if (n === 0) {
        closeSync(fd);
        return Buffer.concat(chunks, size);
      }
      add(chunk.subarray(0, n));
    }
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EAGAIN") {
      closeSync(fd);
      throw error instanceof AgentloopError
        ? error
        : new AgentloopError("config", `Cannot read ${name}: ${errorMessage(error)}.`);
    }
  }
  const socket = new Socket({ fd, readable: true, writable: false });
  return new Promise((resolve, reject) => {
    socket.on("data", (chunk: Buffer) => {
      try {
        add(chunk);
      } catch (error) {
        socket.destroy();
        reject(error);
      }
    });
    socket.on("end", () => resolve(Buffer.concat(chunks, size)));
    socket.on("error", (error) =>
      reject(new AgentloopError("config", `Cannot read ${name}: ${error.message}.`)),
    );
  });
}

const tooLarge = (name: string) =>
  new AgentloopError(
    "config",
    `${name} is larger than 1 MiB, the limit for a config file: check the --config path.`,
  );

const text = (bytes: Buffer) => {
  const decoded = bytes.toString("utf8");
  return decoded.charCodeAt(0) === 0xfeff ? decoded.slice(1) : decoded;
};
