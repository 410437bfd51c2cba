import type { AnyAgent } from "../agent/agent.js";
import { outputSpec } from "../agent/output.js";
import { AgentloopError } from "../core/errors.js";
import { isObject } from "../core/json.js";
import { echoed } from "../core/redact.js";
import type { JsonSchema } from "../tools/tool.js";
import { errorResponse } from "./errors.js";
import type { RequestProblem } from "./openai-compat.js";

/**
 * A client's structured output request (Responses `text.format`, Chat Completions
 * `response_format`) as the run's output schema, so the answer is what the client asked for:
 * `json_schema` → its schema (the answer validated against it, sent on to the model's provider),
 * `json_object` → any JSON object, `text` or nothing → none.
 */
export interface RequestedFormat {
  schema?: JsonSchema;
  /** Whether the client gave a schema of its own (`json_schema`), not just asked for JSON. */
  own: boolean;
}

/**
 * Reads a format object. `param` names it (`text.format`, `response_format`); `schemaAt` is where
 * a `json_schema` format keeps its schema (`schema`, or Chat's `json_schema.schema`).
 * @returns a problem for a 400 instead: an unknown type, a missing schema, one whose root is not an object.
 */
export function requestedFormat(
  format: unknown,
  param: string,
  schemaAt: readonly string[],
): RequestedFormat | RequestProblem {
  if (format === undefined || format === null) return { own: false };
  if (!isObject(format) || typeof format.type !== "string") {
    return { message: `${param}: expected an object with a type (text, json_object or json_schema).`, param };
  }
  switch (format.type) {
    case "text":
      return { own: false };
    case "json_object":
      return { schema: { type: "object" }, own: false };
    case "json_schema": {
      let schema: unknown = format;
      for (const key of schemaAt) schema = isObject(schema) ? schema[key] : undefined;
      const at = [param, ...schemaAt].join(".");
      if (!isObject(schema)) {
        return { message: `${at}: a json_schema format needs its JSON Schema (an object) here.`, param: at };
      }
      try {
        outputSpec(schema, at);
      } catch (error) {
        if (!(error instanceof AgentloopError)) throw error;
        return { message: error.message, param: at };
      }
      return { schema, own: true };
    }
    default:
      return {
        message: `${param}.type: '${echoed(format.type)}' is not supported here: use text, json_object or json_schema.`,
        param: `${param}.type`,
      };
  }
}

/**
 * The run's output schema for `agent` (undefined for none), or the 400 of an agent that has an
 * output schema of its own when the client sent another: its answers follow its own.
 */
export function runOutputSchema(
  agent: AnyAgent,
  model: string,
  format: RequestedFormat,
  param: string,
): JsonSchema | undefined | Response {
  if (agent.options.outputSchema === undefined) return format.schema;
  if (!format.own) return undefined; // JSON asked for: the agent's answers are JSON objects anyway.
  const message = `The model '${model}' answers with its own output schema: send no json_schema ${param} (its answers are JSON objects valid against that schema).`;
  return errorResponse(400, message, "invalid_request", { param });
}
