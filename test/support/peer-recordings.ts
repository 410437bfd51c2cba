/**
 * The recorded responses of other projects' suites in ../shared/fixtures/peer-recordings (see its
 * README.md and manifest.json): each entry's file turned back into the HTTP answer its manifest
 * describes (status, content type, framing), to be served by a fake server and assembled by the
 * adapter through the official SDK, as in production.
 */
import { readFileSync } from "node:fs";
import { sharedFixture } from "./model-harness.js";

export interface PeerEntry {
  id: string;
  file: string;
  /** "chat" (Chat Completions) or "anthropic" (Messages); the Responses API ones live in `responses/`. */
  protocol: "chat" | "anthropic";
  /** "stream" or "json" (a non-streaming request). */
  mode: "stream" | "json";
  framing: string;
  status: number;
  contentType: string;
  peer: string;
  real: boolean;
  note: string;
}

const PEER_DIR = sharedFixture("peer-recordings");

/** A Responses API recording (`responses/manifest.json`): its file is framed already, as served. */
export interface ResponsesEntry extends Omit<PeerEntry, "protocol"> {
  protocol: "responses";
  features: string[];
}

/** The Responses API recordings' entries; `[]` when the folder is absent. */
export function responsesEntries(): ResponsesEntry[] {
  if (!PEER_DIR) return [];
  return JSON.parse(readFileSync(`${PEER_DIR}/responses/manifest.json`, "utf8")) as ResponsesEntry[];
}

/** What the fake server sends for a Responses recording: its bytes, with the recorded status and content type. */
export function responsesBody(entry: ResponsesEntry): string {
  return readFileSync(`${PEER_DIR}/responses/${entry.file}`, "utf8");
}

/**
 * A Responses recording's output items as the API finished them: a body's `output`, or in a stream
 * each `response.output_item.done` item at its `output_index` (what the API reference says to send
 * back: a reasoning item's `encrypted_content` there may differ from the final response object's),
 * then any item only the final response object names.
 */
export function responsesOutputItems(entry: ResponsesEntry): Record<string, unknown>[] {
  type Item = Record<string, unknown>;
  const text = responsesBody(entry);
  if (entry.mode === "json") return (JSON.parse(text) as { output?: Item[] }).output ?? [];
  const items: Item[] = [];
  for (const line of text.split("\n")) {
    if (!line.startsWith("data: ")) continue;
    const event = JSON.parse(line.slice(6)) as {
      type?: string;
      output_index?: number;
      item?: Item;
      response?: { output?: Item[] };
    };
    if (event.type === "response.output_item.done" && event.item)
      items[event.output_index ?? items.length] = event.item;
    if (event.type === "response.completed" || event.type === "response.incomplete") {
      for (const [i, item] of (event.response?.output ?? []).entries()) items[i] ??= item;
    }
  }
  return items.filter(Boolean);
}

/** The manifest's entries; `[]` when the folder is absent. */
export function peerEntries(): PeerEntry[] {
  if (!PEER_DIR) return [];
  return JSON.parse(readFileSync(`${PEER_DIR}/manifest.json`, "utf8")) as PeerEntry[];
}

/** What the fake server sends for `entry`: the status, the content type and the body bytes. */
export function peerResponse(entry: PeerEntry): { status: number; contentType: string; body: string } {
  const text = readFileSync(`${PEER_DIR}/${entry.file}`, "utf8");
  const { framing } = entry;
  let body: string;
  if (framing.startsWith("jsonl:")) {
    let lines = text.split("\n").filter((line) => line.trim() !== "");
    if (framing.includes("from the second completion id on dropped")) {
      const first = (JSON.parse(lines[0] as string) as { id?: string }).id;
      const other = lines.findIndex((line) => (JSON.parse(line) as { id?: string }).id !== first);
      if (other >= 0) lines = lines.slice(0, other);
    }
    if (framing.includes("after the first message_stop dropped")) {
      const stop = lines.findIndex((line) => (JSON.parse(line) as { type?: string }).type === "message_stop");
      if (stop >= 0) lines = lines.slice(0, stop + 1);
    }
    body =
      entry.protocol === "anthropic"
        ? lines
            .map((line) => `event: ${(JSON.parse(line) as { type: string }).type}\ndata: ${line}\n\n`)
            .join("")
        : `${lines.map((line) => `data: ${line}\n\n`).join("")}data: [DONE]\n\n`;
  } else if (/byte for byte/.test(framing)) {
    body = text;
  } else {
    throw new Error(`peer recording ${entry.id}: unknown framing '${framing}'`);
  }
  return { status: entry.status, contentType: entry.contentType, body };
}
