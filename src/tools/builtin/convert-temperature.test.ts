import { describe, expect, it } from "vitest";
import { convertTemperature, convertTemperatureValue } from "./convert-temperature.js";

const context = () => ({ signal: new AbortController().signal, toolCallId: "t" });

/** Runs the tool as the loop does: validate, then execute with the validated value. */
async function run(args: unknown): Promise<unknown> {
  const checked = convertTemperature.validate(args);
  if (!checked.ok) throw new Error(checked.message);
  return convertTemperature.execute(checked.value, context());
}

describe("convertTemperatureValue", () => {
  it.each([
    [100, "C", "F", 212],
    [0, "C", "F", 32],
    [-40, "C", "F", -40],
    [212, "F", "C", 100],
    [98.6, "F", "C", 37],
    [0, "C", "K", 273.15],
    [0, "K", "C", -273.15],
    [32, "F", "K", 273.15],
    [0, "K", "F", -459.67],
    [-459.67, "F", "K", 0],
    [25, "C", "C", 25],
  ] as const)("%d %s = %d %s", (value, from, to, expected) => {
    expect(convertTemperatureValue(value, from, to)).toBeCloseTo(expected, 10);
  });

  it.each([
    [-273.16, "C", "-273.16 C is below absolute zero (-273.15 C)"],
    [-500, "F", "-500 F is below absolute zero (-459.67 F)"],
    [-1, "K", "-1 K is below absolute zero (0 K)"],
  ] as const)("rejects %d %s below absolute zero", (value, from, message) => {
    expect(() => convertTemperatureValue(value, from, "K")).toThrow(message);
  });

  it("never returns a result below absolute zero", () => {
    expect(convertTemperatureValue(-459.67, "F", "C")).toBeGreaterThanOrEqual(-273.15);
    expect(convertTemperatureValue(-273.15, "C", "F")).toBeGreaterThanOrEqual(-459.67);
  });

  it("rejects results too large to represent", () => {
    expect(() => convertTemperatureValue(1e308, "C", "F")).toThrow("Result is too large");
  });
});

describe("convert_temperature tool", () => {
  it("has the fixed name and a JSON schema with clear enums", () => {
    expect(convertTemperature.name).toBe("convert_temperature");
    const properties = convertTemperature.parameters.properties as Record<
      string,
      { type?: string; enum?: string[] }
    >;
    expect(properties.value?.type).toBe("number");
    expect(properties.from_unit?.enum).toEqual(["C", "F", "K"]);
    expect(properties.to_unit?.enum).toEqual(["C", "F", "K"]);
    expect(convertTemperature.parameters.required).toEqual(["value", "from_unit", "to_unit"]);
  });

  it.each([
    [{ value: 100, from_unit: "C", to_unit: "F" }, "100 C = 212 F"],
    [{ value: 98.6, from_unit: "F", to_unit: "C" }, "98.6 F = 37 C"],
    [{ value: 0, from_unit: "K", to_unit: "C" }, "0 K = -273.15 C"],
    [{ value: 36.6, from_unit: "C", to_unit: "F" }, "36.6 C = 97.88 F"],
    [{ value: 300, from_unit: "K", to_unit: "F" }, "300 K = 80.33 F"],
    [{ value: -40, from_unit: "F", to_unit: "C" }, "-40 F = -40 C"],
  ])("%j gives %s", async (args, expected) => {
    expect(await run(args)).toBe(expected);
  });

  it("accepts lowercase units and unit names", async () => {
    expect(await run({ value: 100, from_unit: "celsius", to_unit: "fahrenheit" })).toBe("100 C = 212 F");
    expect(await run({ value: 0, from_unit: "c", to_unit: "Kelvin" })).toBe("0 C = 273.15 K");
    expect(await run({ value: 212, from_unit: " F ", to_unit: "k" })).toBe("212 F = 373.15 K");
  });

  it("validates its arguments, naming the field", () => {
    const badUnit = convertTemperature.validate({ value: 1, from_unit: "X", to_unit: "C" });
    expect(badUnit.ok).toBe(false);
    if (!badUnit.ok) expect(badUnit.message).toContain("from_unit");
    const badValue = convertTemperature.validate({ value: "hot", from_unit: "C", to_unit: "F" });
    expect(badValue.ok).toBe(false);
    if (!badValue.ok) expect(badValue.message).toContain("value");
  });

  it("throws below absolute zero", async () => {
    await expect(run({ value: -300, from_unit: "C", to_unit: "F" })).rejects.toThrow("below absolute zero");
  });
});
