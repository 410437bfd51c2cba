/**
 * Structured output: an agent's `outputSchema` compiled once, the check of a final answer against
 * it, and what tells the model about it when its provider cannot enforce it.
 */
import type { z } from "zod";
import { AgentloopError, errorMessage } from "../core/errors.js";
import type { JsonSchema, Tool, ValidationResult } from "../tools/tool.js";
import { toolJsonSchema, validateWith } from "../tools/tool.js";
import { zod as loadZod } from "../tools/zod.js";

/** A zod schema (the answer's type flows from it) or a JSON Schema object. Its root must be an object. */
export type OutputSchema = z.ZodType | JsonSchema;

/**
 * What `result.output` holds for an agent with this `outputSchema`: the validated object when the
 * run ended with an answer (`final_answer`, `task_completion`), else `undefined`; without a
 * schema, the answer text.
 */
export type OutputOf<S> = S extends z.ZodType
  ? z.output<S> | undefined
  : S extends JsonSchema
    ? Record<string, unknown> | undefined
    : string;

/** An output schema, compiled. Plain data apart from the validator. */
export interface OutputSpec {
  /** What the model must write: a JSON Schema whose root is an object (a zod schema's input side). */
  readonly jsonSchema: JsonSchema;
  readonly zod: z.ZodType;
}

/** The name under which the schema reaches providers (OpenAI's `json_schema.name`, Anthropic's output tool). */
export const OUTPUT_NAME = "final_output";

const isZod = (value: unknown): value is z.ZodType =>
  typeof value === "object" && value !== null && "_zod" in value;

/**
 * Compiles an output schema.
 * @throws AgentloopError("invalid_option") when it is unusable or does not describe a JSON object.
 */
export function outputSpec(schema: OutputSchema, where = "outputSchema"): OutputSpec {
  let jsonSchema: JsonSchema;
  let zod: z.ZodType;
  try {
    if (isZod(schema)) {
      zod = schema;
      // The model writes the schema's input; zod's transforms then give the output.
      jsonSchema = toolJsonSchema(schema);
    } else {
      const { $schema: _ignored, ...rest } = schema;
      jsonSchema = rest;
      zod = loadZod().fromJSONSchema(schema as z.core.JSONSchema.JSONSchema);
    }
  } catch (error) {
    throw new AgentloopError("invalid_option", `${where} is not a usable schema: ${errorMessage(error)}`);
  }
  if (jsonSchema.type !== "object") {
    const got = jsonSchema.type === undefined ? "no type" : `type ${JSON.stringify(jsonSchema.type)}`;
    const wrap = isZod(schema)
      ? "z.object({ answer: <your schema> })"
      : '{ "type": "object", "properties": { "answer": <your schema> }, "required": ["answer"] }';
    throw new AgentloopError(
      "invalid_option",
      `${where} must describe a JSON object (type "object"), got ${got}: wrap the value in one, e.g. ${wrap}.`,
    );
  }
  return { jsonSchema, zod };
}

export type Answer = { ok: true; json: string; value: unknown } | { ok: false; message: string };

/**
 * Reads a final answer: one JSON object (a Markdown code fence around it is tolerated), valid
 * against the schema. `json` is the object as compact JSON; `value` what the schema parsed.
 */
export function readAnswer(spec: OutputSpec, text: string): Answer {
  const trimmed = text.trim();
  const fenced = /^```[\w-]*\s*([\s\S]*?)\s*```$/.exec(trimmed);
  let raw: unknown;
  try {
    raw = JSON.parse(fenced ? (fenced[1] ?? "") : trimmed);
  } catch {
    return { ok: false, message: "the answer is not JSON" };
  }
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) {
    return { ok: false, message: "the answer is not a JSON object" };
  }
  const checked = validateWith(spec.zod, raw);
  if (!checked.ok) return checked;
  return { ok: true, json: JSON.stringify(raw), value: checked.value };
}

/** The correction the model reads after an answer that does not validate. */
export function answerCorrection(message: string): string {
  return `Your final answer does not match the required output schema: ${message}. Reply with only a JSON object valid against the schema.`;
}

/** How a cut-off reply ended, in words: "was cut off at the output token limit", ... */
export const CUT_OFF = {
  length: "was cut off at the output token limit",
  content_filter: "was stopped by the provider's content filter",
} as const;

/** The correction the model reads after an answer that was cut short before it was complete JSON. */
export function cutOffCorrection(reason: keyof typeof CUT_OFF): string {
  const shorter = reason === "length" ? " shorter" : "";
  return `Your final answer ${CUT_OFF[reason]} before it was complete, so it is not a valid JSON object. Reply with only a${shorter} JSON object valid against the required output schema.`;
}

/** The stop message of a run whose model refused to give the structured answer: one line, quoting the refusal. */
export function refusalMessage(refusal: string): string {
  const flat = refusal.replace(/\s+/g, " ").trim() || "(no reason given)";
  const quoted = flat.length > 300 ? `${flat.slice(0, 299)}…` : flat;
  return `The model refused to give an answer for the output schema: ${quoted}`;
}

/** The system prompt's part for a model whose provider cannot enforce the schema itself. */
export function outputInstructions(spec: OutputSpec): string {
  return (
    "Give your final answer (a reply without tool calls) as one JSON object and nothing else, valid against this JSON Schema:\n" +
    JSON.stringify(spec.jsonSchema)
  );
}

/** `task_completion` for explicit mode with an output schema: its `result` is the answer object. */
export function taskCompletionFor(spec: OutputSpec, base: Tool): Tool {
  const wrapper = loadZod().object({ result: spec.zod });
  return {
    name: base.name,
    description: base.description,
    parameters: {
      type: "object",
      properties: { result: spec.jsonSchema },
      required: ["result"],
      additionalProperties: false,
    },
    loopBreaking: true,
    validate: (args): ValidationResult => {
      const checked = validateWith(wrapper, args);
      // The arguments as sent: the result is stored as their JSON, parsed again for `output`.
      return checked.ok ? { ok: true, value: args } : checked;
    },
    execute: (args) => JSON.stringify((args as { result: unknown }).result),
  };
}
