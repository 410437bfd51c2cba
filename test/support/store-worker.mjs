// A process that uses the built SQLite store, for the tests that need two real processes
// (test/sqlite-store.test.ts). Usage: node store-worker.mjs <mode> <db file> <session id> [go file]
//   hold         acquire the session, store a running run, print "held", stay alive
//   acquire      acquire the session, print {"status","messages"} or {"code","message"}, exit
//   checkpoints  acquire, then store message 0, 1, 2, ... printing each number once it is stored
//   fill         acquire, store 4 KB messages until a checkpoint fails, print {"written","code","message"}
//   open         print "ready", wait for the go file, open the store and write to the session
import { existsSync } from "node:fs";
import { sqliteStore } from "../../dist/store/index.js";

const [mode, file, sessionId, goFile] = process.argv.slice(2);
const print = (value) =>
  process.stdout.write(`${typeof value === "string" ? value : JSON.stringify(value)}\n`);
const failure = (error) => ({ code: error.code, message: error.message });

if (mode === "open") {
  print("ready");
  while (!existsSync(goFile)) await new Promise((resolve) => setTimeout(resolve, 1));
}

let store;
try {
  store = await sqliteStore(file);
} catch (error) {
  print(failure(error));
  process.exit(0);
}

if (mode === "hold") {
  const handle = await store.acquire(sessionId);
  await handle.checkpoint({
    messages: [{ role: "user", content: "hold" }],
    run: { runId: `run-${process.pid}`, status: "running", state: { pid: process.pid } },
  });
  print("held");
  setInterval(() => {}, 60_000);
} else if (mode === "acquire") {
  try {
    const handle = await store.acquire(sessionId);
    print({ status: handle.session.summary.status, messages: handle.session.messages.length });
    await handle.release();
  } catch (error) {
    print(failure(error));
  }
  await store.close();
} else if (mode === "checkpoints") {
  const handle = await store.acquire(sessionId);
  for (let i = 0; ; i++) {
    await handle.checkpoint({
      messages: [{ role: "tool", toolCallId: `call_${i}`, name: "t", content: String(i), isError: false }],
      run: { runId: "r", status: "running", state: { i } },
    });
    print(String(i));
  }
} else if (mode === "fill") {
  const handle = await store.acquire(sessionId);
  let written = 0;
  try {
    for (;;) {
      await handle.checkpoint({ messages: [{ role: "user", content: `${written} ${"x".repeat(4096)}` }] });
      written++;
    }
  } catch (error) {
    print({ written, ...failure(error) });
  }
  process.exit(0);
} else if (mode === "open") {
  try {
    const handle = await store.acquire(sessionId);
    await handle.checkpoint({ messages: [{ role: "user", content: sessionId }] });
    await handle.release();
    print({ ok: true });
  } catch (error) {
    print(failure(error));
  }
  await store.close();
}
