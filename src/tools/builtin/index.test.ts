import { describe, expect, it } from "vitest";
import { builtinTools, calculator, convertTemperature, getCurrentTime } from "./index.js";

describe("builtinTools", () => {
  it("returns the three built-ins in a fixed order", () => {
    expect(builtinTools().map((tool) => tool.name)).toEqual([
      "calculator",
      "get_current_time",
      "convert_temperature",
    ]);
    expect(builtinTools()).toEqual([calculator, getCurrentTime, convertTemperature]);
  });

  it("returns a fresh array each call", () => {
    const first = builtinTools();
    first.pop();
    expect(builtinTools()).toHaveLength(3);
  });

  it("gives every tool a description and an object schema", () => {
    for (const tool of builtinTools()) {
      expect(tool.description.length).toBeGreaterThan(20);
      expect(tool.parameters.type).toBe("object");
      expect(tool.parameters).not.toHaveProperty("$schema");
    }
  });
});
