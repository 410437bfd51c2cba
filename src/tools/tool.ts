import type { z } from "zod";
import { AgentloopError } from "../core/errors.js";
import { imagePart } from "../core/media.js";
import type { ImageInput, MediaPart } from "../core/messages.js";
import { type Zod, zod } from "./zod.js";

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
  /**
   * The caller runs it, not the loop (a run's `clientTools`): a call of it pauses the run with
   * `tool_calls` once the other calls of its reply are done, and `execute` is never called.
   */
  readonly external?: boolean;
  /** Checks the parsed arguments; the message names the offending field. Must not throw. */
  validate(args: unknown): ValidationResult;
  /** Runs the tool. A non-string result is serialised to JSON; a throw becomes an error result. */
  execute(args: unknown, context: ToolContext): unknown;
}

const TOOL_OUTPUT: unique symbol = Symbol.for("agentloop.toolOutput");

/**
 * A tool result with images (or audio) beside its text: what `execute` returns for the model to
 * see them. Made by `toolOutput`; any other object a tool returns is serialised to JSON.
 */
export interface ToolOutput {
  readonly text: string;
  readonly media: readonly MediaPart[];
  readonly [TOOL_OUTPUT]: true;
}

/**
 * A result whose images reach the model as images: Anthropic gets them in the `tool_result`,
 * OpenAI-compatible models in a user message right after the tool results (their tool messages
 * carry text only). Images over the agent's `maxImageBytes`, or not PNG, JPEG, GIF or WebP, are
 * replaced by a note in the text. Events and logs show only the text.
 * @throws AgentloopError for an image input that is not an image (see `ImageInput`).
 */
export function toolOutput(text: string, media: readonly (MediaPart | ImageInput)[]): ToolOutput {
  const parts = media.map((part, i) =>
    "url" in part ? part : imagePart(part, `Image ${i + 1} of the tool result`, Number.POSITIVE_INFINITY),
  );
  return { text, media: parts, [TOOL_OUTPUT]: true };
}

export function isToolOutput(value: unknown): value is ToolOutput {
  return typeof value === "object" && value !== null && TOOL_OUTPUT in value;
}

interface ToolResultInfo {
  content: string;
  isError: boolean;
}

const TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

/** What every tool definition may set; `Args` is the type of the validated arguments. */
interface ToolDefinitionBase<Args> {
  name: string;
  description: string;
  timeoutMs?: number;
  sequential?: boolean;
  loopBreaking?: Tool["loopBreaking"];
  /** See {@link Tool.needsApproval}; a predicate gets the arguments as `execute` does. */
  needsApproval?: boolean | ((args: Args) => boolean);
  annotations?: ToolAnnotations;
}

/** A tool whose arguments are described by a zod schema (an object schema). */
export interface ZodToolDefinition<S extends z.ZodType> extends ToolDefinitionBase<z.output<S>> {
  parameters: S;
  execute: (args: z.output<S>, context: ToolContext) => unknown;
}

/** A tool whose arguments are described by a JSON Schema object. */
export interface JsonSchemaToolDefinition extends ToolDefinitionBase<Record<string, unknown>> {
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
  const { name, parameters } = definition;
  checkName(name);
  let schema: z.ZodType;
  let jsonSchema: JsonSchema;
  try {
    if (isZodSchema(parameters)) {
      schema = parameters;
      jsonSchema = toolJsonSchema(parameters);
    } else {
      schema = zod().fromJSONSchema(parameters as z.core.JSONSchema.JSONSchema);
      jsonSchema = { type: "object", properties: {}, ...parameters };
    }
  } catch (error) {
    throw new AgentloopError(
      "invalid_tool",
      `Tool '${name}' has an unusable parameters schema: ${String(error)}`,
    );
  }
  return toolOf(definition, jsonSchema, (args) => validateWith(schema, args));
}

/**
 * A tool whose zod schema is built on its first call (the built-in tools): `parameters` is the
 * JSON Schema the model sees, `schema(z)` the zod schema that checks the arguments (a test holds
 * its JSON Schema equal to `parameters`). Neither defining nor offering the tool loads zod.
 */
export function lazyTool<S extends z.ZodType>(
  definition: Omit<ZodToolDefinition<S>, "parameters"> & { parameters: JsonSchema; schema: (z: Zod) => S },
): Tool {
  checkName(definition.name);
  let schema: S | undefined;
  const tool = toolOf(definition, definition.parameters, (args) => {
    schema ??= definition.schema(zod());
    return validateWith(schema, args);
  });
  lazySchemas.set(tool, definition.schema);
  return tool;
}

const lazySchemas = new WeakMap<Tool, (z: Zod) => z.ZodType>();

/** The zod schema of a {@link lazyTool}, built now: for the test that holds it equal to `parameters`. */
export function lazySchemaOf(tool: Tool): z.ZodType | undefined {
  return lazySchemas.get(tool)?.(zod());
}

function checkName(name: string): void {
  if (!TOOL_NAME.test(name)) {
    throw new AgentloopError(
      "invalid_tool",
      `Tool name '${name}' is invalid: use 1-64 letters, digits, '_' or '-'.`,
    );
  }
}

function toolOf(
  definition: ToolDefinitionBase<never> & { execute: unknown },
  parameters: JsonSchema,
  validate: Tool["validate"],
): Tool {
  return {
    name: definition.name,
    description: definition.description,
    parameters,
    ...(definition.timeoutMs !== undefined && { timeoutMs: definition.timeoutMs }),
    ...(definition.sequential !== undefined && { sequential: definition.sequential }),
    ...(definition.loopBreaking !== undefined && { loopBreaking: definition.loopBreaking }),
    // Like execute, needsApproval is called only with arguments the tool's schema validated.
    ...(definition.needsApproval !== undefined && {
      needsApproval: definition.needsApproval as Tool["needsApproval"],
    }),
    ...(definition.annotations !== undefined && { annotations: definition.annotations }),
    validate,
    execute: definition.execute as Tool["execute"],
  };
}

function isZodSchema(value: unknown): value is z.ZodType {
  return typeof value === "object" && value !== null && "_zod" in value;
}

/**
 * The JSON Schema sent to providers: the input shape, without the `$schema` marker. A classic zod
 * schema converts itself (no zod to load here); zod/mini's go through `z.toJSONSchema`.
 */
export function toolJsonSchema(schema: z.ZodType): JsonSchema {
  const options = { io: "input", unrepresentable: "any" } as const;
  const json =
    typeof schema.toJSONSchema === "function"
      ? schema.toJSONSchema(options)
      : zod().toJSONSchema(schema, options);
  const { $schema: _ignored, ...rest } = json as JsonSchema;
  return rest;
}

/** Checks `args` against a zod schema: the parsed value, or every problem as `field: message`, joined by "; ". */
export function validateWith(schema: z.ZodType, args: unknown): ValidationResult {
  const parsed = schema.safeParse(args);
  if (parsed.success) return { ok: true, value: parsed.data };
  const problems = parsed.error.issues.map((issue) => {
    const field = issue.path.length > 0 ? issue.path.map(String).join(".") : "(arguments)";
    return `${field}: ${issue.message}`;
  });
  return { ok: false, message: problems.join("; ") };
}
