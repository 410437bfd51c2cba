import { z } from "zod";
import { AgentloopError } from "../core/errors.js";

/** What a running tool gets besides its arguments. */
export interface ToolContext {
  /** Fires when the run is aborted or the tool's timeout passes; long tools should honour it. */
  signal: AbortSignal;
  toolCallId: string;
  /** Reports progress of a long-running call; it reaches the caller as a `tool_progress` event. */
  onProgress?: (progress: ToolProgress) => void;
}

export interface ToolProgress {
  progress: number;
  total?: number;
  message?: string;
}

export type JsonSchema = Record<string, unknown>;

/**
 * Hints about what a tool does, as MCP servers annotate their tools (the MCP `ToolAnnotations`).
 * Informational, except `destructiveHint: true`, which makes a call need approval when the tool
 * sets no `needsApproval` of its own.
 */
export interface ToolAnnotations {
  readonly title?: string;
  readonly readOnlyHint?: boolean;
  readonly destructiveHint?: boolean;
  readonly idempotentHint?: boolean;
  readonly openWorldHint?: boolean;
}

export type ValidationResult = { ok: true; value: unknown } | { ok: false; message: string };

/**
 * A tool the loop can call. Build one with `defineTool`; MCP and other sources implement the
 * same shape.
 */
export interface Tool {
  /** Matches `^[a-zA-Z0-9_-]{1,64}$`; the model calls the tool by this name. */
  readonly name: string;
  readonly description: string;
  /** JSON Schema of the arguments object, as sent to the model. */
  readonly parameters: JsonSchema;
  /** Per-call time limit; the agent's `toolTimeoutMs` (default 60 s) when absent. */
  readonly timeoutMs?: number;
  /** Run this tool alone, never concurrently with the other calls of its iteration. */
  readonly sequential?: boolean;
  /**
   * Ends the loop when called (its result becomes the output): `true`, or a predicate of the
   * arguments and the result for tools that end the run only sometimes.
   */
  readonly loopBreaking?: boolean | ((args: unknown, result: ToolResultInfo) => boolean);
  /**
   * Whether a call must be approved by a person before it runs: `true`, or a predicate of the
   * validated arguments (a throw counts as `true`). Without `onApproval`, such calls wait and the
   * run stops with `approval_required`. Unset: `annotations.destructiveHint === true` decides.
   */
  readonly needsApproval?: boolean | ((args: unknown) => boolean);
  /** What the tool's source says about it (MCP tool annotations). */
  readonly annotations?: ToolAnnotations;
  /** Checks the parsed arguments; the message names the offending field. Must not throw. */
  validate(args: unknown): ValidationResult;
  /** Runs the tool. A non-string result is serialised to JSON; a throw becomes an error result. */
  execute(args: unknown, context: ToolContext): unknown;
}

export interface ToolResultInfo {
  content: string;
  isError: boolean;
}

const TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

interface ToolDefinitionBase {
  name: string;
  description: string;
  timeoutMs?: number;
  sequential?: boolean;
  loopBreaking?: Tool["loopBreaking"];
  needsApproval?: Tool["needsApproval"];
  annotations?: ToolAnnotations;
}

/** A tool whose arguments are described by a zod schema (an object schema). */
export interface ZodToolDefinition<S extends z.ZodType> extends ToolDefinitionBase {
  parameters: S;
  execute: (args: z.output<S>, context: ToolContext) => unknown;
}

/** A tool whose arguments are described by a JSON Schema object. */
export interface JsonSchemaToolDefinition extends ToolDefinitionBase {
  parameters: JsonSchema;
  execute: (args: Record<string, unknown>, context: ToolContext) => unknown;
}

/**
 * Defines a tool. Arguments are validated against `parameters` before `execute` runs, and a
 * validation failure goes back to the model as an error naming the field.
 *
 * @throws AgentloopError("invalid_tool") when the name or the schema is unusable.
 */
export function defineTool<S extends z.ZodType>(definition: ZodToolDefinition<S>): Tool;
export function defineTool(definition: JsonSchemaToolDefinition): Tool;
export function defineTool(definition: ZodToolDefinition<z.ZodType> | JsonSchemaToolDefinition): Tool {
  const { name, description, parameters } = definition;
  if (!TOOL_NAME.test(name)) {
    throw new AgentloopError(
      "invalid_tool",
      `Tool name '${name}' is invalid: use 1-64 letters, digits, '_' or '-'.`,
    );
  }
  let schema: z.ZodType;
  let jsonSchema: JsonSchema;
  try {
    if (isZodSchema(parameters)) {
      schema = parameters;
      jsonSchema = toolJsonSchema(parameters);
    } else {
      schema = z.fromJSONSchema(parameters as z.core.JSONSchema.JSONSchema);
      jsonSchema = { type: "object", properties: {}, ...parameters };
    }
  } catch (error) {
    throw new AgentloopError(
      "invalid_tool",
      `Tool '${name}' has an unusable parameters schema: ${String(error)}`,
    );
  }
  return {
    name,
    description,
    parameters: jsonSchema,
    ...(definition.timeoutMs !== undefined && { timeoutMs: definition.timeoutMs }),
    ...(definition.sequential !== undefined && { sequential: definition.sequential }),
    ...(definition.loopBreaking !== undefined && { loopBreaking: definition.loopBreaking }),
    ...(definition.needsApproval !== undefined && { needsApproval: definition.needsApproval }),
    ...(definition.annotations !== undefined && { annotations: definition.annotations }),
    validate: (args) => validateWith(schema, args),
    execute: definition.execute as Tool["execute"],
  };
}

function isZodSchema(value: unknown): value is z.ZodType {
  return typeof value === "object" && value !== null && "_zod" in value;
}

/** The JSON Schema sent to providers: the input shape, without the `$schema` marker. */
function toolJsonSchema(schema: z.ZodType): JsonSchema {
  const { $schema: _ignored, ...rest } = z.toJSONSchema(schema, {
    io: "input",
    unrepresentable: "any",
  }) as JsonSchema;
  return rest;
}

function validateWith(schema: z.ZodType, args: unknown): ValidationResult {
  const parsed = schema.safeParse(args);
  if (parsed.success) return { ok: true, value: parsed.data };
  const problems = parsed.error.issues.map((issue) => {
    const field = issue.path.length > 0 ? issue.path.map(String).join(".") : "(arguments)";
    return `${field}: ${issue.message}`;
  });
  return { ok: false, message: problems.join("; ") };
}
