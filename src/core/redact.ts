/**
 * Secret redaction for text that leaves the process (error messages, logs, events).
 *
 * Contract: `redactSecrets(text, secrets)` returns `text` with
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
  // Keys masked by a provider: visible head and tail around asterisks.
  [/[A-Za-z0-9_-]*\*{4,}[A-Za-z0-9_*-]*/g, REDACTED],
  [/\b(Bearer)\s+[^\s"',;]+/gi, "$1 [REDACTED]"],
  [/\b(authorization|api-key|x-api-key)(["']?\s*[:=]\s*["']?)(?!Bearer\b)[^\s"',;]+/gi, "$1$2[REDACTED]"],
];

export function redactSecrets(text: string, secrets: readonly (string | null | undefined)[]): string {
  let out = secretRedactor(secrets)?.(text) ?? text;
  for (const [pattern, replacement] of PATTERNS) out = out.replace(pattern, replacement);
  return out;
}

/**
 * A function that replaces every verbatim occurrence of the given secrets (4+ characters) by
 * `[REDACTED]`, or `undefined` when there is nothing to redact. Only exact secrets, no patterns:
 * it runs on tool results, which may hold anything, and must not mangle ordinary text. Text
 * without a secret is returned as is (one `includes` per secret, no allocation).
 */
export function secretRedactor(
  secrets: readonly (string | null | undefined)[],
): ((text: string) => string) | undefined {
  // Longest first, so a secret that contains another one is replaced whole.
  const verbatim = [
    ...new Set(secrets.filter((s): s is string => typeof s === "string" && s.length >= MIN_SECRET_LENGTH)),
  ].sort((a, b) => b.length - a.length);
  if (verbatim.length === 0) return undefined;
  return (text) => {
    let out = text;
    for (const secret of verbatim) if (out.includes(secret)) out = out.replaceAll(secret, REDACTED);
    return out;
  };
}

/** The credentials of the environment (SPEC section 4) that must never leave the process. */
export function environmentSecrets(
  env: Readonly<Record<string, string | undefined>> = process.env,
): string[] {
  return ["OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AGENTLOOP_API_KEY"]
    .map((name) => env[name]?.trim())
    .filter((value): value is string => value !== undefined && value !== "");
}
