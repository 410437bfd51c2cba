/** A JSON object: not null, not an array (what a wire body, a tool call's arguments or a schema must be). */
export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Whether `text` parses as JSON (one value, whatever its type). */
export function isJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}
