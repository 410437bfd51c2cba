import { describe, expect, it } from "vitest";
import { strictSchema } from "./strict-schema.js";

describe("strictSchema", () => {
  it("closes every object of a schema whose properties are all required", () => {
    const schema = {
      type: "object",
      properties: {
        city: { type: "string", description: "Where" },
        days: {
          type: "array",
          items: { type: "object", properties: { t: { type: "number" } }, required: ["t"] },
        },
        unit: { anyOf: [{ type: "string", enum: ["c", "f"] }, { type: "null" }] },
      },
      required: ["city", "days", "unit"],
    };
    expect(strictSchema(schema)).toEqual({
      ...schema,
      additionalProperties: false,
      properties: {
        ...schema.properties,
        days: {
          type: "array",
          items: {
            type: "object",
            properties: { t: { type: "number" } },
            required: ["t"],
            additionalProperties: false,
          },
        },
      },
    });
    expect(schema).not.toHaveProperty("additionalProperties"); // a copy
  });

  it("has no strict form for optional properties, open objects, unknown keywords, an untyped node or a root that is not an object", () => {
    const object = (extra: object) => ({
      type: "object",
      properties: { a: { type: "string" } },
      required: ["a"],
      ...extra,
    });
    expect(strictSchema(object({ required: [] }))).toBeUndefined();
    expect(strictSchema(object({ additionalProperties: true }))).toBeUndefined();
    expect(strictSchema(object({ properties: { a: { type: "string", minLength: 1 } } }))).toBeUndefined();
    expect(strictSchema(object({ properties: { a: {} } }))).toBeUndefined();
    expect(strictSchema({ type: "array", items: { type: "string" } })).toBeUndefined();
    // An object that names no properties takes any (JSON mode's `{ "type": "object" }`): closing it would allow only {}.
    expect(strictSchema({ type: "object" })).toBeUndefined();
    expect(strictSchema(object({ properties: { a: { type: "object" } } }))).toBeUndefined();
    expect(strictSchema({ type: "object", properties: {}, required: [] })).toEqual({
      type: "object",
      properties: {},
      required: [],
      additionalProperties: false,
    });
    expect(strictSchema(object({}))).toMatchObject({ additionalProperties: false });
  });
});
