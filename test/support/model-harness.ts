/**
 * What the model adapters' tests share: a fake server per test, the adapter contract check on the
 * collected events, the accessors of the terminal event, and the recorded provider streams.
 */
import { existsSync, readFileSync } from "node:fs";
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, expect, it } from "vitest";
import type { Model, ModelError, ModelEvent, ModelReply, ModelRequest } from "../../src/models/adapter.js";

/** One user message "hi", no system prompt, no tools. */
export const HI: ModelRequest = { system: "", messages: [{ role: "user", content: "hi" }], tools: [] };

/**
 * `serve(respond)` starts a fake server (by `start`, e.g. `startFakeOpenAIServer`); every server
 * started in a test is closed after it (closing one earlier in the test is fine).
 */
export function fakeServerPerTest<S extends { close(): Promise<void> }, Responder>(
  start: (options: { respond: Responder }) => Promise<S>,
): (respond: Responder) => Promise<S> {
  const started: S[] = [];
  afterEach(async () => {
    await Promise.all(started.splice(0).map((s) => s.close()));
  });
  return async (respond) => {
    const server = await start({ respond });
    started.push(server);
    return server;
  };
}

/** Collects every event of one call and checks the adapter contract: deltas, then exactly one terminal event. */
export async function collect(
  model: Model,
  req: ModelRequest = HI,
  onEvent?: (e: ModelEvent) => void,
  signal?: AbortSignal,
): Promise<ModelEvent[]> {
  const events: ModelEvent[] = [];
  for await (const e of model.stream(req, { signal })) {
    events.push(e);
    onEvent?.(e);
  }
  const terminal = events.filter((e) => e.type === "done" || e.type === "error");
  expect(terminal).toHaveLength(1);
  expect(events.at(-1)).toBe(terminal[0]);
  return events;
}

/** The reply of the final `done` event; throws when the last event is not one. */
export function done(events: ModelEvent[]): ModelReply {
  const last = events.at(-1);
  if (last?.type !== "done") throw new Error(`expected done, got ${JSON.stringify(last)}`);
  return last.message;
}

/**
 * A reply without what identifies the response (`id`, `model`: kept for tracing, SPEC section 11),
 * each checked to be a non-empty string where present: what the fixtures' expectations compare.
 */
export function bare(reply: ModelReply): Omit<ModelReply, "id" | "model"> {
  const { id, model, ...rest } = reply;
  for (const value of [id, model]) if (value !== undefined) expect(value).toMatch(/./);
  return rest;
}

/** The error of the final `error` event; throws when the last event is not one. */
export function errorOf(events: ModelEvent[]): ModelError {
  const last = events.at(-1);
  if (last?.type !== "error") throw new Error(`expected error, got ${JSON.stringify(last)}`);
  return last.error;
}

/** The text of all the deltas of one type, joined. */
export const deltaText = (events: ModelEvent[], type: "text_delta" | "thinking_delta") =>
  events.map((e) => (e.type === type ? e.text : "")).join("");

export const call = (id: string, name: string, args: string) => ({ id, name, arguments: args });

/** The project's root (this file is test/support/model-harness.ts). */
const ROOT = fileURLToPath(new URL("../../", import.meta.url));

/**
 * The absolute path of `../shared/fixtures/<name>` from the project root (recorded real provider
 * traffic, present in every checkout and in CI, never copied into the project), or `undefined`
 * when it is absent: the tests that read it then skip, saying why.
 */
export function sharedFixture(name: string): string | undefined {
  const path = resolve(ROOT, "../shared/fixtures", name);
  return existsSync(path) ? path : undefined;
}

/** Why the recorded-data tests skip when `sharedFixture` found nothing. */
const missingFixture = (name: string) =>
  `skipped: ${resolve(ROOT, "../shared/fixtures", name)} is absent (recorded provider traffic lives beside the project, in ../shared/fixtures)`;

/** Recorded provider streams in ../shared/fixtures/llm-streams (provenance and expected results in SOURCES.md there). */
export const FIXTURES = sharedFixture("llm-streams");
export const fixture = (name: string) => readFileSync(resolve(FIXTURES ?? "", name), "utf8");

/**
 * Registers, when `../shared/fixtures/<name>` is absent, one test that skips with `missingFixture`'s
 * reason, so the reporter says why the recorded-data tests did not run. Returns whether it is there.
 */
export function recordedData(name: string): boolean {
  const present = sharedFixture(name) !== undefined;
  if (!present) it(`recorded data ${name}`, (ctx) => ctx.skip(missingFixture(name)));
  return present;
}
