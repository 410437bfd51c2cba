import { describe, expect, it } from "vitest";
import { calculator, evaluateExpression, formatNumber } from "./calculator.js";

const calc = (expression: string) => formatNumber(evaluateExpression(expression));
const context = () => ({ signal: new AbortController().signal, toolCallId: "t" });

describe("evaluateExpression: arithmetic", () => {
  it.each([
    ["1 + 2 * 3", "7"],
    ["(1 + 2) * 3", "9"],
    ["10 - 4 - 3", "3"],
    ["100 / 10 / 5", "2"],
    ["2 * 3 % 4", "2"],
    ["10 % 3", "1"],
    ["-7 % 3", "-1"],
    ["7.5 % 2", "1.5"],
    ["2^10", "1024"],
    ["2 ^ 3 ^ 2", "512"],
    ["(2 ^ 3) ^ 2", "64"],
    ["2**3**2", "512"],
    ["2 * 3^2", "18"],
    ["-2^2", "-4"],
    ["(-2)^2", "4"],
    ["2^-1", "0.5"],
    ["-(2+3)*4", "-20"],
    ["--3", "3"],
    ["+3", "3"],
    ["-+-3", "3"],
    ["2*-3", "-6"],
    ["1 - -1", "2"],
    ["-0", "0"],
    ["0 * -1", "0"],
  ])("%s = %s", (expression, expected) => {
    expect(calc(expression)).toBe(expected);
  });

  it("tolerates whitespace of any kind", () => {
    expect(calc("  \t( 1 +\n2 )\r\n*  3  ")).toBe("9");
    expect(calc("1+2")).toBe("3");
  });

  it("reads decimals, leading dots and scientific notation", () => {
    expect(calc(".5 + 0.25")).toBe("0.75");
    expect(calc("1e3")).toBe("1000");
    expect(calc("2.5E-2")).toBe("0.025");
    expect(calc("1e+2 * 3")).toBe("300");
    expect(calc("5.")).toBe("5");
  });

  it("accepts typographic operators as their ASCII forms", () => {
    expect(calc("3 × 4 ÷ 2 − 1")).toBe("5");
  });

  it("handles long flat chains without deep recursion", () => {
    expect(calc(Array(3000).fill("1").join("+"))).toBe("3000");
  });
});

describe("evaluateExpression: constants and functions", () => {
  it.each([
    ["pi", "3.14159265358979"],
    ["e", "2.71828182845905"],
    ["PI * 2", "6.28318530717959"],
    ["sqrt(16)", "4"],
    ["sqrt(2)^2", "2"],
    ["abs(-3.5)", "3.5"],
    ["round(2.5)", "3"],
    ["round(-2.5)", "-3"],
    ["round(3.14159, 2)", "3.14"],
    ["round(1234, -2)", "1200"],
    ["floor(-1.5)", "-2"],
    ["ceil(1.2)", "2"],
    ["sin(pi / 2)", "1"],
    ["cos(0)", "1"],
    ["tan(pi / 4)", "1"],
    ["asin(1) * 2", "3.14159265358979"],
    ["acos(1)", "0"],
    ["atan(1) * 4", "3.14159265358979"],
    ["log(1000)", "3"],
    ["ln(e)", "1"],
    ["log2(1024)", "10"],
    ["exp(0)", "1"],
    ["min(3, 1, 2)", "1"],
    ["max(3, 1, 2, 10)", "10"],
    ["max(-1)", "-1"],
    ["pow(2, 8)", "256"],
    ["Sqrt(9)", "3"],
    ["sqrt(abs(-16)) + max(1, min(5, 3))", "7"],
  ])("%s = %s", (expression, expected) => {
    expect(calc(expression)).toBe(expected);
  });
});

describe("formatNumber", () => {
  it.each([
    ["157.09 * 493.89", "77585.1801"],
    ["0.1 + 0.2", "0.3"],
    ["1.1 * 1.1", "1.21"],
    ["1 / 3", "0.333333333333333"],
    ["2 / 3", "0.666666666666667"],
    ["0.3 - 0.1", "0.2"],
    ["4.35 * 100", "435"],
    ["2^53 - 1", "9007199254740991"],
    ["123456789 * 1000", "123456789000"],
  ])("%s prints as %s", (expression, expected) => {
    expect(calc(expression)).toBe(expected);
  });

  it("prints integers without a decimal point and -0 as 0", () => {
    expect(formatNumber(42)).toBe("42");
    expect(formatNumber(-0)).toBe("0");
    expect(formatNumber(-1e-20 * 0)).toBe("0");
  });

  it("uses plain notation for ordinary magnitudes", () => {
    expect(formatNumber(0.000123)).toBe("0.000123");
    expect(formatNumber(12345678901234.5)).toBe("12345678901234.5");
    expect(formatNumber(1e25)).toBe("1e+25");
  });
});

describe("evaluateExpression: errors", () => {
  it.each([
    ["", "Empty expression"],
    ["   ", "Empty expression"],
    ["2 + $", "Unexpected character '$' at position 5"],
    ["2 + 😀", "Unexpected character '😀' at position 5"],
    ["2 # 3", "Unexpected character '#' at position 3"],
    ["1 / 0", "Division by zero at position 3"],
    ["5 % (2 - 2)", "Division by zero at position 3"],
    ["0 ^ -1", "Division by zero at position 3"],
    ["pow(0, -2)", "Division by zero"],
    ["foo(1)", "Unknown function 'foo' at position 1"],
    ["x + 1", "Unknown name 'x' at position 1"],
    ["(1 + 2", "Missing closing parenthesis for '(' at position 1"],
    ["max(1, 2", "Missing closing parenthesis for '(' at position 4"],
    ["1 + 2)", "Unmatched closing parenthesis at position 6"],
    ["2 +", "Unexpected end of expression at position 4"],
    ["2 3", "Unexpected number '3' at position 3"],
    ["()", "Unexpected ')' at position 2"],
    ["1,000", "Unexpected ',' at position 2"],
    ["2e", "Unexpected name 'e' at position 2"],
    ["1.2.3", "Unexpected number '.3' at position 4"],
    ["sqrt 4", "Function 'sqrt' at position 1 needs parentheses"],
    ["sqrt(1, 2)", "Function 'sqrt' at position 1 takes 1 argument, got 2"],
    ["pow(2)", "Function 'pow' at position 1 takes 2 arguments, got 1"],
    ["max()", "Function 'max' at position 1 takes at least 1 argument, got 0"],
    ["round(1, 2, 3)", "Function 'round' at position 1 takes 1 or 2 arguments, got 3"],
    ["round(1, 0.5)", "round: digits must be an integer"],
    ["sqrt(-1)", "Result is not a real number"],
    ["asin(2)", "Result is not a real number"],
    ["log(0)", "Result is not a real number"],
    ["ln(-1)", "Result is not a real number"],
    ["exp(1000)", "Result is too large"],
    ["10^400", "Result is too large"],
    ["1e308 * 10", "Result is too large"],
    ["1e999", "Number '1e999' at position 1 is too large"],
  ])("%j throws %j", (expression, message) => {
    expect(() => evaluateExpression(expression)).toThrow(message);
  });

  it("throws plain Errors with one-line messages", () => {
    for (const bad of ["2 + $", "1/0", "foo(\n1)", "(1", `${"a".repeat(500)}`]) {
      let caught: unknown;
      try {
        evaluateExpression(bad);
      } catch (error) {
        caught = error;
      }
      expect(caught).toBeInstanceOf(Error);
      expect((caught as Error).message).not.toMatch(/\n/);
      expect((caught as Error).message.length).toBeLessThan(200);
    }
  });

  it("reports syntax errors before evaluation errors", () => {
    expect(() => evaluateExpression("1/0 +")).toThrow("Unexpected end of expression");
  });

  it.each([
    "process.exit(1)",
    "constructor",
    "constructor.constructor('return process')()",
    "__proto__",
    "toString()",
    "valueOf",
    "hasOwnProperty(1)",
    "this",
    "globalThis",
    "require('fs')",
    "Math.PI",
    "1; 2",
    "a = 1",
    "[1]",
    "`1`",
    "'1'",
    "1 && 2",
    "2 == 2",
    "x => x",
  ])("rejects code-like input %j", (expression) => {
    expect(() => evaluateExpression(expression)).toThrow(Error);
  });

  it("bounds the input size and nesting depth", () => {
    expect(() => evaluateExpression("1".repeat(10_001))).toThrow("Expression is too long");
    expect(() => evaluateExpression(`${"(".repeat(500)}1${")".repeat(500)}`)).toThrow("nested too deeply");
    expect(() => evaluateExpression(`${"-".repeat(5000)}1`)).toThrow("nested too deeply");
    expect(() => evaluateExpression(Array(2000).fill("2").join("^"))).toThrow("nested too deeply");
    expect(() => evaluateExpression("(".repeat(9999))).toThrow("nested too deeply");
    expect(calc(`${"(".repeat(100)}1${")".repeat(100)}`)).toBe("1");
  });
});

describe("calculator tool", () => {
  it("has the fixed name and a JSON schema with a described expression", () => {
    expect(calculator.name).toBe("calculator");
    const properties = calculator.parameters.properties as Record<
      string,
      { type?: string; description?: string }
    >;
    expect(properties.expression?.type).toBe("string");
    expect(properties.expression?.description).toBeTruthy();
    expect(calculator.parameters.required).toEqual(["expression"]);
  });

  it("validates its arguments, naming the field", () => {
    const bad = calculator.validate({ expression: 5 });
    expect(bad.ok).toBe(false);
    if (!bad.ok) expect(bad.message).toContain("expression");
    expect(calculator.validate({}).ok).toBe(false);
    expect(calculator.validate({ expression: "2+2" })).toEqual({ ok: true, value: { expression: "2+2" } });
  });

  it("executes to the formatted result", async () => {
    expect(await calculator.execute({ expression: "2+2" }, context())).toBe("4");
    expect(await calculator.execute({ expression: "157.09 * 493.89" }, context())).toBe("77585.1801");
  });

  it("throws an Error for bad expressions", async () => {
    await expect(async () => calculator.execute({ expression: "1/0" }, context())).rejects.toThrow(
      "Division by zero",
    );
  });
});
