/**
 * Secret redaction for text that leaves the process (error messages, logs, events).
 *
 * Contract: `redactSecrets(text, secrets)` returns `text` with
 * - every occurrence of each given secret (verbatim, 4+ characters) replaced by `[REDACTED]`;
 * - any OpenAI-style key (`sk-...`, including the partially masked `sk-proj-****abcd` that
 *   OpenAI's 401 bodies echo) replaced by `sk-[REDACTED]`;
 * - the credential after `Bearer ` and after an `Authorization`/`api-key`/`x-api-key` header name
 *   replaced by `[REDACTED]`.
 * Secrets shorter than 4 characters are ignored: they cannot be told apart from ordinary text.
 */
const MIN_SECRET_LENGTH = 4;

const PATTERNS: [RegExp, string][] = [
  // OpenAI-style keys, masked or not: sk-..., sk-proj-..., sk-ant-...
  [/\bsk-[A-Za-z0-9_*.-]{3,}/g, "sk-[REDACTED]"],
  [/\b(Bearer)\s+[^\s"',;]+/gi, "$1 [REDACTED]"],
  [/\b(authorization|api-key|x-api-key)(["']?\s*[:=]\s*["']?)(?!Bearer\b)[^\s"',;]+/gi, "$1$2[REDACTED]"],
];

export function redactSecrets(text: string, secrets: readonly (string | null | undefined)[]): string {
  let out = text;
  // Longest first, so a secret that contains another one is replaced whole.
  const verbatim = secrets
    .filter((s): s is string => typeof s === "string" && s.length >= MIN_SECRET_LENGTH)
    .sort((a, b) => b.length - a.length);
  for (const secret of verbatim) out = out.split(secret).join("[REDACTED]");
  for (const [pattern, replacement] of PATTERNS) out = out.replace(pattern, replacement);
  return out;
}
