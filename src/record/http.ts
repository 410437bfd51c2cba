/**
 * The HTTP boundary of a recorded run (SPEC section 12): a fetch that records each model request
 * and its response as the SDK clients send and read them, and one that answers from a recording,
 * so a replay goes through the same SDK parsing and adapter code as the live run did.
 */
import { describeDiff, requestDiff } from "./diff.js";
import {
  providerOf,
  type RecordedProvider,
  type RecordedResponse,
  type Recording,
  type RecordingFile,
} from "./recording.js";

const urlOf = (input: Parameters<typeof fetch>[0]) =>
  typeof input === "string" ? input : input instanceof URL ? input.href : input.url;

/** The JSON body of a model request, or undefined for anything that is not one (MCP, OAuth). */
function modelRequest(input: Parameters<typeof fetch>[0], init: RequestInit | undefined) {
  const url = urlOf(input);
  if (!providerOf(url) || typeof init?.body !== "string") return undefined;
  try {
    const body = JSON.parse(init.body) as unknown;
    return body !== null && typeof body === "object" && !Array.isArray(body)
      ? { url, body: body as Record<string, unknown> }
      : undefined;
  } catch {
    return undefined;
  }
}

/** Headers of a response whose body is given again, decoded: its length and encoding no longer describe it. */
function decodedHeaders(response: Response): Headers {
  const headers = new Headers(response.headers);
  headers.delete("content-length");
  headers.delete("content-encoding");
  return headers;
}

/**
 * A fetch that records every model request sent through it into `file`: the body sent, then the
 * response, a stream's events as they pass (read by the SDK as they come; nothing is buffered
 * before it sees them). Other requests pass untouched.
 */
export function recordingFetch(
  file: RecordingFile,
  base: typeof fetch = (i, init) => fetch(i, init),
): typeof fetch {
  return async (input, init) => {
    const request = modelRequest(input, init);
    if (!request) return base(input, init);
    const done = file.model(request.url, request.body);
    let response: Response;
    try {
      response = await base(input, init);
    } catch (error) {
      done({ status: 0, contentType: "", body: error instanceof Error ? error.message : String(error) });
      throw error;
    }
    const { status, statusText } = response;
    const contentType = response.headers.get("content-type") ?? "";
    if (!response.body || !contentType.includes("text/event-stream")) {
      const body = await response.text();
      done({ status, contentType, body });
      return new Response(body, { status, statusText, headers: decodedHeaders(response) });
    }
    const events: { event?: string; data: string }[] = [];
    // Loaded by the first recorded stream: a run that records nothing never loads it.
    const { createParser } = await import("eventsource-parser");
    const parser = createParser({
      onEvent: (e) =>
        events.push(e.event === undefined ? { data: e.data } : { event: e.event, data: e.data }),
    });
    const decoder = new TextDecoder();
    let ended = false;
    const end = () => {
      if (ended) return;
      ended = true;
      parser.feed(decoder.decode());
      done({ status, contentType, events });
    };
    const body = response.body.pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, controller) {
          parser.feed(decoder.decode(chunk, { stream: true }));
          controller.enqueue(chunk);
        },
        flush: end,
        cancel: end,
      }),
    );
    return new Response(body, { status, statusText, headers: decodedHeaders(response) });
  };
}

/** A recorded response as the SDK would have read it from the wire. */
function responseOf(recorded: RecordedResponse): Response {
  const headers = { "content-type": recorded.contentType };
  if ("body" in recorded) return new Response(recorded.body, { status: recorded.status, headers });
  const text = recorded.events
    .map(({ event, data }) => {
      const lines = data.split("\n").map((line) => `data: ${line}`);
      return `${event === undefined ? "" : `event: ${event}\n`}${lines.join("\n")}\n\n`;
    })
    .join("");
  return new Response(text, { status: recorded.status, headers });
}

/**
 * An answer the SDK takes as the API refusing the request for good (400, not retried), with the
 * code `replay_mismatch` in the provider's error shape: the run stops with that `model_error`.
 */
function mismatchResponse(provider: RecordedProvider, message: string): Response {
  const body =
    provider === "anthropic"
      ? { type: "error", error: { type: "replay_mismatch", message } }
      : { error: { message, type: "replay_mismatch", code: "replay_mismatch" } };
  return new Response(JSON.stringify(body), {
    status: 400,
    headers: { "content-type": "application/json", "x-should-retry": "false" },
  });
}

export interface ReplayOptions {
  /** Answer a request that differs from the recorded one with the recorded response anyway. */
  lenient?: boolean;
  /** Told the readable diff of a request that differs (the CLI prints it on stderr). */
  onMismatch?: (diff: string) => void;
}

/**
 * Answers model requests from a recording, in order, with no network: each request is compared
 * with the recorded one first. Every model that replays one recording shares one `Replay` (a
 * run's sub-agents take their turns from the same file).
 */
export class Replay {
  private next = 0;

  constructor(
    readonly recording: Recording,
    private readonly options: ReplayOptions = {},
  ) {}

  readonly fetch: typeof fetch = async (input, init) => {
    const request = modelRequest(input, init);
    if (!request) {
      throw new TypeError(`a replay sends nothing over the network (${urlOf(input)})`);
    }
    const provider = providerOf(request.url) ?? "openai";
    const number = this.next + 1;
    const entry = this.recording.models[this.next];
    if (!entry) {
      const message = `model request ${number} was not recorded (the recording has ${this.recording.models.length}): the run asked the model more often than the recorded one did`;
      this.options.onMismatch?.(message);
      return mismatchResponse(provider, message);
    }
    const differences = requestDiff(entry.request, request.body);
    if (differences.length > 0 && !this.options.lenient) {
      this.options.onMismatch?.(describeDiff(number, entry.request, differences));
      const first = differences[0];
      return mismatchResponse(
        provider,
        `model request ${number} differs from the recording at ${first?.path ?? "its body"}: see the diff, or replay with --replay-lenient to take the recorded responses anyway`,
      );
    }
    this.next++;
    return responseOf(entry.response);
  };
}
