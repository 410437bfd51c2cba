/**
 * Where a model request differs from the recorded one, for a person: which field, recorded
 * against now, and for a message which one and whose (a changed system prompt or tool schema is
 * what usually breaks a replay).
 */

export interface Difference {
  /** A JSON path into the request body, e.g. `messages[2].content` or `tools[0].function.parameters`. */
  path: string;
  recorded: unknown;
  now: unknown;
}

const MAX_DIFFERENCES = 8;
const MAX_VALUE = 240;

/** The differences between two request bodies, depth first, at most a few. */
export function requestDiff(recorded: unknown, now: unknown): Difference[] {
  const out: Difference[] = [];
  walk(recorded, now, "", out);
  return out;
}

function walk(a: unknown, b: unknown, path: string, out: Difference[]): void {
  if (out.length >= MAX_DIFFERENCES || a === b) return;
  if (Array.isArray(a) && Array.isArray(b)) {
    const n = Math.max(a.length, b.length);
    for (let i = 0; i < n && out.length < MAX_DIFFERENCES; i++) walk(a[i], b[i], `${path}[${i}]`, out);
    return;
  }
  if (isPlain(a) && isPlain(b)) {
    const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
    for (const key of keys) {
      if (out.length >= MAX_DIFFERENCES) return;
      walk(a[key], b[key], path ? `${path}.${key}` : key, out);
    }
    return;
  }
  out.push({ path: path || "(the body)", recorded: a, now: b });
}

const isPlain = (v: unknown): v is Record<string, unknown> =>
  v !== null && typeof v === "object" && !Array.isArray(v);

function show(value: unknown): string {
  if (value === undefined) return "(absent)";
  const text = JSON.stringify(value);
  return text.length > MAX_VALUE ? `${text.slice(0, MAX_VALUE)}… (${text.length} characters)` : text;
}

/** What a path's first step names: "message 3 (user)" for `messages[2]...`, "tool 1 (calculator)" for `tools[0]...`. */
function where(body: Record<string, unknown>, path: string): string | undefined {
  const m = /^(messages|input|tools)\[(\d+)\]/.exec(path);
  if (!m)
    return path.startsWith("system") || path.startsWith("instructions") ? "the system prompt" : undefined;
  const list = body[m[1] as string];
  const item = Array.isArray(list) ? (list[Number(m[2])] as Record<string, unknown> | undefined) : undefined;
  const n = Number(m[2]) + 1;
  if (m[1] === "tools") {
    const fn = item?.function as { name?: unknown } | undefined;
    const name = fn?.name ?? item?.name;
    return `tool ${n}${typeof name === "string" ? `, ${name}` : ""}`;
  }
  const role = item?.role ?? item?.type;
  return `message ${n}${typeof role === "string" ? `, ${role}` : ""}`;
}

/** The diff as lines for stderr. */
export function describeDiff(
  number: number,
  recorded: Record<string, unknown>,
  differences: Difference[],
): string {
  const lines = [`model request ${number} differs from the recording:`];
  for (const d of differences) {
    const named = where(recorded, d.path);
    lines.push(`  ${d.path}${named ? ` (${named})` : ""}`);
    lines.push(`    recorded: ${show(d.recorded)}`);
    lines.push(`    now:      ${show(d.now)}`);
  }
  if (differences.length >= MAX_DIFFERENCES) lines.push("  (and maybe more)");
  lines.push("Replay with --replay-lenient to take the recorded responses anyway.");
  return lines.join("\n");
}
