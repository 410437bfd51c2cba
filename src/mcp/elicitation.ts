// Elicitation (MCP `elicitation/create`): a server asks the user for input in the middle of a
// tool call, with a form of flat fields. The request is checked here (not by the SDK, whose
// check answers a malformed form with a protocol error the user never sees), the handler's
// answer is checked against the form, and fields the answer leaves out get their defaults.
import {
  type ElicitRequestFormParams,
  ElicitRequestSchema,
  type ElicitResult,
  type PrimitiveSchemaDefinition,
  PrimitiveSchemaDefinitionSchema,
} from "@modelcontextprotocol/sdk/types.js";
import { errorMessage } from "../core/errors.js";

/** The form of an elicitation: an object of flat fields, the restricted JSON Schema MCP allows. */
export type ElicitationForm = ElicitRequestFormParams["requestedSchema"];
/** One field: a string (optionally a format), number, integer, boolean, enum or multi-select enum. */
export type ElicitationField = PrimitiveSchemaDefinition;
/** The values of an accepted form, by field name. */
export type ElicitationContent = Record<string, string | number | boolean | string[]>;

export interface ElicitationRequest {
  /** The server asking, by its name in the configuration. */
  server: string;
  /** What the server wants, to show to the person. */
  message: string;
  /** The fields to fill in (already checked to be the restricted form MCP allows). */
  form: ElicitationForm;
  /** Aborted when the server cancels the request or the connection ends. */
  signal: AbortSignal;
}

/**
 * The person's answer: `accept` with the values (fields left out get their defaults), `decline`
 * (they said no) or `cancel` (they dismissed it without choosing).
 */
export type ElicitationResult =
  | { action: "accept"; content: ElicitationContent }
  | { action: "decline" }
  | { action: "cancel" };

/** Answers a server's request for input. A throw, or content that does not fit the form, declines it. */
export type ElicitationHandler = (
  request: ElicitationRequest,
) => ElicitationResult | Promise<ElicitationResult>;

const FORMS_ALLOWED = "forms hold only flat string, number, integer, boolean and enum fields";

/**
 * Answers one raw `elicitation/create` request: a form that is not the restricted form, a URL-mode
 * request (not declared) and a handler that throws or answers outside the form are declined with
 * one line to `warn`. Without a handler every request is declined. Never throws.
 */
export async function answerElicitation(
  request: unknown,
  context: {
    server: string;
    /** How messages name the server, e.g. `MCP server 'files' (agentloop.json)`. */
    label: string;
    handler: ElicitationHandler | undefined;
    warn: (message: string) => void;
    signal: AbortSignal;
  },
): Promise<ElicitResult> {
  const { label, warn } = context;
  const decline = (why: string): ElicitResult => {
    warn(`${label} ${why}: declined.`);
    return { action: "decline" };
  };
  const parsed = ElicitRequestSchema.safeParse(request);
  const params = parsed.success ? parsed.data.params : undefined;
  if (params?.mode === "url")
    return decline("asked to open a web page for input, which agentloop does not do");
  // A default that does not fit its own field is the server's mistake, whatever else the form says.
  const raw = (request as { params?: { requestedSchema?: { properties?: unknown } } } | undefined)?.params;
  const badDefault = defaultProblem(raw?.requestedSchema?.properties);
  if (badDefault !== undefined)
    return decline(`asked for input with a form whose own default does not fit (${badDefault})`);
  if (!params || !("requestedSchema" in params)) {
    return decline(`asked for input with a form MCP does not allow (${formProblem(raw)}; ${FORMS_ALLOWED})`);
  }
  const form = params.requestedSchema;
  const unknownRequired = (form.required ?? []).find((name) => !(name in form.properties));
  if (unknownRequired !== undefined) {
    return decline(
      `asked for input with a form MCP does not allow (required field '${unknownRequired}' is not one of its fields)`,
    );
  }
  if (!context.handler) return { action: "decline" };
  let result: ElicitationResult;
  try {
    result = await context.handler({
      server: context.server,
      message: params.message,
      form,
      signal: context.signal,
    });
  } catch (error) {
    return decline(`asked for input and the onElicitation handler threw (${errorMessage(error)})`);
  }
  if (result.action !== "accept") return { action: result.action === "cancel" ? "cancel" : "decline" };
  const content = withDefaults(form, result.content);
  const problem = contentProblem(form, content);
  if (problem !== undefined)
    return decline(`asked for input and the answer does not fit its form (${problem})`);
  return { action: "accept", content };
}

/**
 * The values of a form filled with its defaults alone, or `missing`: the required fields that
 * have no default (such a form needs a person).
 */
export function formDefaults(
  form: ElicitationForm,
): { content: ElicitationContent; missing?: never } | { content?: never; missing: string[] } {
  const content = withDefaults(form, {});
  const missing = (form.required ?? []).filter((name) => !(name in content));
  return missing.length > 0 ? { missing } : { content };
}

/** The values a field allows, with their titles, when it is an enum or a multi-select. */
export function fieldChoices(field: ElicitationField): { value: string; title: string }[] | undefined {
  const f = field as {
    enum?: string[];
    enumNames?: string[];
    oneOf?: { const: string; title: string }[];
    items?: { enum?: string[]; anyOf?: { const: string; title: string }[] };
  };
  const titled = f.oneOf ?? f.items?.anyOf;
  if (titled) return titled.map((c) => ({ value: c.const, title: c.title }));
  const values = f.enum ?? f.items?.enum;
  return values?.map((value, i) => ({ value, title: f.enumNames?.[i] ?? value }));
}

function withDefaults(form: ElicitationForm, content: ElicitationContent | undefined): ElicitationContent {
  const filled: ElicitationContent = { ...content };
  for (const [name, field] of Object.entries(form.properties)) {
    if (filled[name] === undefined && field.default !== undefined) filled[name] = field.default;
  }
  return filled;
}

/** Why `content` does not fit `form` (the first problem), or undefined when it does. */
function contentProblem(form: ElicitationForm, content: ElicitationContent): string | undefined {
  for (const name of form.required ?? []) if (content[name] === undefined) return `'${name}' is required`;
  for (const [name, value] of Object.entries(content)) {
    const field = form.properties[name];
    if (!field) return `'${name}' is not one of its fields`;
    const problem = valueProblem(field, value);
    if (problem !== undefined) return `'${name}' ${problem}`;
  }
  return undefined;
}

/** Why `value` does not fit `field`, or undefined. */
export function valueProblem(field: ElicitationField, value: unknown): string | undefined {
  const choices = fieldChoices(field)?.map((c) => c.value);
  switch (field.type) {
    case "boolean":
      return typeof value === "boolean" ? undefined : "must be true or false";
    case "number":
    case "integer": {
      if (typeof value !== "number" || !Number.isFinite(value)) return "must be a number";
      if (field.type === "integer" && !Number.isInteger(value)) return "must be a whole number";
      if (field.minimum !== undefined && value < field.minimum) return `must be at least ${field.minimum}`;
      if (field.maximum !== undefined && value > field.maximum) return `must be at most ${field.maximum}`;
      return undefined;
    }
    case "array": {
      if (!Array.isArray(value) || value.some((v) => typeof v !== "string"))
        return "must be a list of strings";
      const other = value.find((v) => !choices?.includes(v));
      if (other !== undefined) return `has '${other}', which is not one of ${choices?.join(", ")}`;
      if (field.minItems !== undefined && value.length < field.minItems)
        return `needs at least ${field.minItems} choices`;
      if (field.maxItems !== undefined && value.length > field.maxItems)
        return `takes at most ${field.maxItems} choices`;
      return undefined;
    }
    default: {
      if (typeof value !== "string") return "must be a string";
      if (choices) return choices.includes(value) ? undefined : `must be one of ${choices.join(", ")}`;
      const f = field as { minLength?: number; maxLength?: number; format?: string };
      if (f.minLength !== undefined && value.length < f.minLength)
        return `needs at least ${f.minLength} characters`;
      if (f.maxLength !== undefined && value.length > f.maxLength)
        return `takes at most ${f.maxLength} characters`;
      if (f.format !== undefined && !FORMATS[f.format]?.(value)) return `must be a valid ${f.format}`;
      return undefined;
    }
  }
}

const FORMATS: Record<string, (value: string) => boolean> = {
  email: (v) => /^[^\s@]+@[^\s@]+$/.test(v),
  uri: (v) => URL.canParse(v),
  date: (v) => /^\d{4}-\d{2}-\d{2}$/.test(v) && !Number.isNaN(Date.parse(v)),
  "date-time": (v) => /^\d{4}-\d{2}-\d{2}T/.test(v) && !Number.isNaN(Date.parse(v)),
};

/**
 * The first field whose `default` does not fit the field itself (its type, choices, range), in a
 * few words: "'age' defaults to "ten", which must be a number"; undefined when every default fits.
 */
function defaultProblem(properties: unknown): string | undefined {
  if (typeof properties !== "object" || properties === null) return undefined;
  for (const [name, field] of Object.entries(properties)) {
    if (typeof field !== "object" || field === null || !("default" in field)) continue;
    const { default: value, ...rest } = field as { default: unknown };
    const plain = PrimitiveSchemaDefinitionSchema.safeParse(rest);
    if (!plain.success) continue; // the field itself is wrong: formProblem says so
    const problem = valueProblem(plain.data, value);
    if (problem !== undefined) return `'${name}' defaults to ${JSON.stringify(value)}, which ${problem}`;
  }
  return undefined;
}

/** What is wrong with a form the SDK's schema refused, in a few words. */
function formProblem(params: unknown): string {
  const p = (typeof params === "object" && params !== null ? params : {}) as Record<string, unknown>;
  if (typeof p.message !== "string") return "it has no message";
  const schema = p.requestedSchema as Record<string, unknown> | undefined;
  if (typeof schema !== "object" || schema === null) return "it has no requestedSchema";
  if (schema.type !== "object") return `the form is of type ${JSON.stringify(schema.type)}, not "object"`;
  const properties = schema.properties;
  if (typeof properties !== "object" || properties === null) return "the form has no properties";
  for (const [name, field] of Object.entries(properties)) {
    if (PrimitiveSchemaDefinitionSchema.safeParse(field).success) continue;
    const type = (field as { type?: unknown } | null)?.type;
    if (type === "object") return `field '${name}' is a nested object`;
    if (type === "array") return `field '${name}' is a list other than a multi-select of string choices`;
    return `field '${name}' is not a plain field (type ${JSON.stringify(type) ?? "missing"})`;
  }
  return "its required list is not a list of field names";
}
