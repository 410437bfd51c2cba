/**
 * OpenAI's strict structured outputs accept a subset of JSON Schema: every object lists all its
 * properties as required and allows no others, and only some keywords are understood. A schema
 * that fits (after `additionalProperties: false` is added where it is missing: the answer is
 * validated by the agent's own schema anyway) is sent with `strict: true`; another goes as is,
 * with `strict: false`, and the model follows it on a best-effort basis.
 */

/** The keywords strict mode supports (OpenAI's structured outputs guide). */
const SUPPORTED = new Set([
  "type",
  "properties",
  "required",
  "additionalProperties",
  "items",
  "enum",
  "const",
  "anyOf",
  "$ref",
  "$defs",
  "definitions",
  "description",
  "title",
  "pattern",
  "format",
  "minimum",
  "maximum",
  "exclusiveMinimum",
  "exclusiveMaximum",
  "multipleOf",
  "minItems",
  "maxItems",
]);

/**
 * An output schema as OpenAI's structured outputs take it, the same for Chat Completions
 * (`response_format.json_schema`) and the Responses API (`text.format`): strict when the schema
 * allows, else as is with `strict: false`.
 */
export function jsonSchemaFormat(output: { name: string; schema: Node }): {
  name: string;
  schema: Node;
  strict: boolean;
} {
  const strict = strictSchema(output.schema);
  return { name: output.name, schema: strict ?? output.schema, strict: strict !== undefined };
}

/** OpenAI's limit of nesting in a strict schema is far lower; this only bounds the walk. */
const MAX_DEPTH = 32;

type Node = Record<string, unknown>;

const isNode = (value: unknown): value is Node =>
  typeof value === "object" && value !== null && !Array.isArray(value);

/**
 * The schema as strict mode takes it (a copy; `additionalProperties: false` added to objects that
 * do not say), or undefined when it cannot be strict: an optional property, an open object, an
 * unsupported keyword, an object that names no properties, a root that is not an object.
 */
export function strictSchema(schema: Node): Node | undefined {
  if (schema.type !== "object" || "anyOf" in schema) return undefined;
  return strictNode(schema, 0);
}

function strictNode(node: unknown, depth: number): Node | undefined {
  if (!isNode(node) || depth > MAX_DEPTH) return undefined;
  for (const key of Object.keys(node)) if (!SUPPORTED.has(key)) return undefined;
  // An empty schema (any value) has no strict form.
  if (!["type", "$ref", "anyOf", "enum", "const"].some((key) => key in node)) return undefined;
  const out: Node = { ...node };
  const types = Array.isArray(node.type) ? node.type : [node.type];
  if (types.includes("object") || "properties" in node) {
    // No `properties`: any object (closing it would allow only {}).
    const { properties } = node;
    if (!isNode(properties)) return undefined;
    const required = Array.isArray(node.required) ? node.required : [];
    if (Object.keys(properties).some((name) => !required.includes(name))) return undefined;
    if (node.additionalProperties !== undefined && node.additionalProperties !== false) return undefined;
    out.additionalProperties = false;
    const mapped = mapValues(properties, depth);
    if (!mapped) return undefined;
    out.properties = mapped;
  }
  if ("items" in node) {
    const items = strictNode(node.items, depth + 1);
    if (!items) return undefined;
    out.items = items;
  }
  if ("anyOf" in node) {
    if (!Array.isArray(node.anyOf)) return undefined;
    const options = node.anyOf.map((option) => strictNode(option, depth + 1));
    if (options.some((option) => option === undefined)) return undefined;
    out.anyOf = options;
  }
  for (const key of ["$defs", "definitions"] as const) {
    if (!(key in node)) continue;
    const defs = isNode(node[key]) ? mapValues(node[key] as Node, depth) : undefined;
    if (!defs) return undefined;
    out[key] = defs;
  }
  return out;
}

function mapValues(nodes: Node, depth: number): Node | undefined {
  const out: Node = {};
  for (const [name, value] of Object.entries(nodes)) {
    const strict = strictNode(value, depth + 1);
    if (!strict) return undefined;
    out[name] = strict;
  }
  return out;
}
