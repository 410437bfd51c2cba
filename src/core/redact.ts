/**
 * Secret redaction for text that leaves the process (error messages, logs, events, stores).
 * Every function here is linear in the length of its input (each pattern is anchored so that a
 * start position is tried once), whatever the input holds.
 *
 * Contract: `redactSecrets(text, secrets, max?)` returns `text`, first cut to `max` characters
 * (see `cutBefore`), with
 * - every occurrence of each given secret (verbatim, 4+ characters) replaced by `[REDACTED]`;
 * - any OpenAI-style key (`sk-...`, including the partially masked `sk-proj-****abcd` that
 *   OpenAI's 401 bodies echo) replaced by `sk-[REDACTED]`;
 * - any other provider-masked credential (a token with a run of 4+ `*`, such as
 *   `gsk_ab****************wxyz`) replaced whole by `[REDACTED]`, so no long tail stays visible;
 * - the credential after `Bearer ` and after an `Authorization`/`api-key`/`x-api-key` header name
 *   replaced by `[REDACTED]`.
 * Secrets shorter than 4 characters are ignored: they cannot be told apart from ordinary text.
 */
const MIN_SECRET_LENGTH = 4;
const REDACTED = "[REDACTED]";

const PATTERNS: [RegExp, string][] = [
  // OpenAI-style keys, masked or not: sk-..., sk-proj-..., sk-ant-...
  [/\bsk-[A-Za-z0-9_*.-]{2,}[A-Za-z0-9_*-]/g, "sk-[REDACTED]"],
  // Keys masked by a provider: visible head and tail around asterisks. The head starts where its
  // run of key characters starts (the lookbehind), so a long run without asterisks is scanned
  // once, not once per position.
  [/(?<![A-Za-z0-9_-])[A-Za-z0-9_-]*\*{4,}[A-Za-z0-9_*-]*/g, REDACTED],
  [/\b(Bearer)\s+[^\s"',;]+/gi, "$1 [REDACTED]"],
  [/\b(authorization|api-key|x-api-key)(["']?\s*[:=]\s*["']?)(?!Bearer\b)[^\s"',;]+/gi, "$1$2[REDACTED]"],
];

export function redactSecrets(
  text: string,
  secrets: readonly (string | null | undefined)[],
  max = Number.POSITIVE_INFINITY,
): string {
  const verbatim = secretList(secrets);
  let out = text.length > max ? `${cutBefore(text, max, verbatim)}…` : text;
  for (const secret of verbatim) if (out.includes(secret)) out = out.replaceAll(secret, REDACTED);
  for (const [pattern, replacement] of PATTERNS) out = out.replace(pattern, replacement);
  return out;
}

/**
 * The first `max` characters of `text` (all of it when shorter), ending earlier where the cut
 * would split one of `secrets`: no prefix of a secret is left for redaction to miss. Reads at
 * most `max` plus the longest secret's length characters of `text`.
 */
export function cutBefore(
  text: string,
  max: number,
  secrets: readonly (string | null | undefined)[],
): string {
  if (text.length <= max) return text;
  let end = max;
  for (let moved = true; moved; ) {
    moved = false;
    for (const secret of secrets) {
      if (typeof secret !== "string" || secret.length < MIN_SECRET_LENGTH) continue;
      // A secret that starts in the last `length - 1` characters before `end` and goes on past it.
      const from = Math.max(0, end - secret.length + 1);
      const at = text.slice(from, end + secret.length - 1).indexOf(secret);
      if (at >= 0 && from + at < end) {
        end = from + at;
        moved = true;
      }
    }
  }
  return text.slice(0, end);
}

/** The secrets worth redacting (4+ characters), without repeats, longest first (so a secret that contains another is replaced whole). */
function secretList(secrets: readonly (string | null | undefined)[]): string[] {
  return [
    ...new Set(secrets.filter((s): s is string => typeof s === "string" && s.length >= MIN_SECRET_LENGTH)),
  ].sort((a, b) => b.length - a.length);
}

/**
 * Configured secrets, replaced verbatim by `[REDACTED]`. Only exact secrets, no patterns: it
 * runs on tool results and model replies, which may hold anything, and must not mangle ordinary
 * text. Text without a secret is returned as is (one `includes` per secret, no allocation).
 */
export interface Redactor {
  /** `text` with every secret replaced. */
  readonly text: (text: string) => string;
  /**
   * A JSON text (a tool call's arguments) with every secret replaced, however its strings write
   * it (as is, with a quote or a backslash escaped, or with any character as a `\uXXXX` or `\/`
   * escape): the result is JSON of the same shape.
   */
  json(text: string): string;
  /** A redactor of one text that arrives in pieces (a streamed reply), so a secret split across pieces is caught. */
  pieces(): PieceRedactor;
}

/**
 * Redacts a text given in pieces. `push` returns what can be shown of the text so far: redacted,
 * and without its end when that end could be the start of a secret (held until the next piece
 * tells); `end` returns what is held. The pieces returned, joined, are the whole text redacted,
 * and never hold a secret, not even split across two of them.
 */
interface PieceRedactor {
  push(piece: string): string;
  end(): string;
}

/** A `Redactor` of the given secrets (4+ characters), or `undefined` when there is nothing to redact. */
export function secretRedactor(secrets: readonly (string | null | undefined)[]): Redactor | undefined {
  const verbatim = secretList(secrets);
  if (verbatim.length === 0) return undefined;
  const escaped = verbatim.map((s) => JSON.stringify(s).slice(1, -1)).filter((e, i) => e !== verbatim[i]);
  const text = (input: string) => replaceAll(input, verbatim);
  return {
    text,
    json: (input) => redactJson(replaceAll(replaceAll(input, verbatim), escaped), text),
    pieces: () => new Pieces(verbatim),
  };
}

/** Deeper arguments are refused before any tool runs (see tools/execute.ts); their text is left as is. */
const MAX_JSON_DEPTH = 64;

/**
 * `json` (secrets written as is already replaced) with the secrets its escapes spell replaced
 * too: a string with a backslash may hold one in any form, so the JSON is read, every string (and
 * key) redacted, and written again when one changed. Text without a backslash, or that is not
 * JSON, is returned as is.
 */
function redactJson(json: string, redact: (text: string) => string): string {
  if (!json.includes("\\")) return json;
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch {
    return json;
  }
  let changed = false;
  const walk = (v: unknown, depth: number): unknown => {
    if (depth > MAX_JSON_DEPTH) throw new RangeError("too deep");
    if (typeof v === "string") {
      const shown = redact(v);
      if (shown !== v) changed = true;
      return shown;
    }
    if (Array.isArray(v)) return v.map((item) => walk(item, depth + 1));
    if (v === null || typeof v !== "object") return v;
    // fromEntries defines each key as its own property ("__proto__" included).
    return Object.fromEntries(Object.entries(v).map(([k, item]) => [walk(k, depth), walk(item, depth + 1)]));
  };
  try {
    const redacted = walk(value, 0);
    return changed ? JSON.stringify(redacted) : json;
  } catch {
    return json;
  }
}

function replaceAll(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const secret of secrets) if (out.includes(secret)) out = out.replaceAll(secret, REDACTED);
  return out;
}

class Pieces implements PieceRedactor {
  private held = "";
  constructor(private readonly secrets: readonly string[]) {}

  push(piece: string): string {
    const text = replaceAll(this.held === "" ? piece : this.held + piece, this.secrets);
    const keep = secretStart(text, this.secrets);
    this.held = keep === text.length ? "" : text.slice(keep);
    return keep === text.length ? text : text.slice(0, keep);
  }

  end(): string {
    const rest = this.held;
    this.held = "";
    return rest;
  }
}

/** Where the longest end of `text` that is the start of a secret begins (`text.length` when none). */
function secretStart(text: string, secrets: readonly string[]): number {
  let start = text.length;
  for (const secret of secrets) {
    const first = secret.charCodeAt(0);
    for (let i = Math.max(0, text.length - secret.length + 1); i < start; i++) {
      if (text.charCodeAt(i) === first && startsSecret(text, i, secret)) {
        start = i;
        break;
      }
    }
  }
  return start;
}

/** Whether `text` from `i` to its end is the start of `secret`. */
function startsSecret(text: string, i: number, secret: string): boolean {
  for (let j = i + 1; j < text.length; j++) if (text.charCodeAt(j) !== secret.charCodeAt(j - i)) return false;
  return true;
}

/** The credentials of the environment (SPEC section 4) that must never leave the process. */
export function environmentSecrets(
  env: Readonly<Record<string, string | undefined>> = process.env,
): string[] {
  return ["OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AGENTLOOP_API_KEY"]
    .map((name) => env[name]?.trim())
    .filter((value): value is string => value !== undefined && value !== "");
}

/** An id or name a request gave, cut for echoing in a message: at most `max` characters, then `…`. */
export function echoed(value: string, max = 80): string {
  return value.length <= max ? value : `${value.slice(0, max)}…`;
}
