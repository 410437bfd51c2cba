import { lazyTool, type Tool } from "../tool.js";

/**
 * The `calculator` built-in: a hand-written recursive-descent parser and evaluator for
 * arithmetic. Nothing is ever passed to `eval`/`Function`; names resolve only through the
 * fixed tables below (Maps, so `constructor`, `__proto__` and friends are unknown names).
 *
 * Grammar (lowest precedence first):
 *   expression := term (('+' | '-') term)*
 *   term       := unary (('*' | '/' | '%') unary)*
 *   unary      := ('-' | '+') unary | power
 *   power      := primary (('^' | '**') unary)?      right-associative, so -2^2 = -4
 *   primary    := number | constant | name '(' args ')' | '(' expression ')'
 *
 * Positions in error messages count characters from 1.
 */

const MAX_EXPRESSION_LENGTH = 10_000;
const MAX_NESTING_DEPTH = 200;

/** `value` is meaningful for numbers only; `pos` is 1-based. */
interface Token {
  kind: "number" | "name" | "op" | "invalid" | "end";
  text: string;
  value: number;
  pos: number;
}

/** Parsed expression. Same-precedence chains are flat lists, so tree depth tracks nesting only. */
type Node =
  | { kind: "num"; value: number }
  | { kind: "neg"; operand: Node }
  | { kind: "chain"; first: Node; rest: { op: string; pos: number; operand: Node }[] }
  | { kind: "pow"; base: Node; exponent: Node; pos: number }
  | { kind: "call"; name: string; args: Node[]; pos: number };

const CONSTANTS = new Map<string, number>(Object.entries({ pi: Math.PI, e: Math.E }));

interface FunctionSpec {
  /** Accepted argument counts: [min, max]. */
  arity: [number, number];
  fn: (...args: number[]) => number;
  /** The result is undefined (not merely too large) when it is infinite, e.g. log(0). */
  infiniteIsUndefined?: boolean;
}

const one = (fn: (x: number) => number): FunctionSpec => ({ arity: [1, 1], fn });
const variadic = (fn: (...xs: number[]) => number): FunctionSpec => ({ arity: [1, Infinity], fn });
const logarithm = (fn: (x: number) => number): FunctionSpec => ({ ...one(fn), infiniteIsUndefined: true });

const FUNCTIONS = new Map<string, FunctionSpec>([
  ["sqrt", one(Math.sqrt)],
  ["abs", one(Math.abs)],
  ["round", { arity: [1, 2], fn: roundHalfAwayFromZero }],
  ["floor", one(Math.floor)],
  ["ceil", one(Math.ceil)],
  ["sin", one(Math.sin)],
  ["cos", one(Math.cos)],
  ["tan", one(Math.tan)],
  ["asin", one(Math.asin)],
  ["acos", one(Math.acos)],
  ["atan", one(Math.atan)],
  ["log", logarithm(Math.log10)],
  ["ln", logarithm(Math.log)],
  ["log2", logarithm(Math.log2)],
  ["exp", one(Math.exp)],
  ["min", variadic(Math.min)],
  ["max", variadic(Math.max)],
  ["pow", { arity: [2, 2], fn: power }],
]);

const BINARY = new Map<string, (a: number, b: number) => number>([
  ["+", (a, b) => a + b],
  ["-", (a, b) => a - b],
  ["*", (a, b) => a * b],
  ["/", (a, b) => a / b],
  ["%", (a, b) => a % b],
]);

/** Typographic operators models sometimes write, read as their ASCII forms. */
const OPERATOR_ALIASES = new Map(Object.entries({ "×": "*", "·": "*", "÷": "/", "−": "-" }));

/** round(x) or round(x, digits), halves away from zero; digits is an integer in [-15, 15]. */
function roundHalfAwayFromZero(x: number, digits = 0): number {
  if (!Number.isInteger(digits) || Math.abs(digits) > 15) {
    throw new Error(`round: digits must be an integer from -15 to 15, got ${formatNumber(digits)}`);
  }
  const factor = 10 ** digits;
  if (!Number.isFinite(x * factor)) return x; // already far coarser than the requested digits
  return (Math.sign(x) * Math.round(Math.abs(x) * factor)) / factor;
}

function power(base: number, exponent: number): number {
  if (base === 0 && exponent < 0) throw new Error("Division by zero");
  return base ** exponent;
}

/** One token per match: whitespace, number, name, `**`, or any other single character. */
const TOKEN = /\s+|((?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)|([A-Za-z_]\w*)|(\*\*)|([\s\S])/uy;

/** Splits the input into tokens; unknown characters become `invalid` tokens, reported when reached. */
function tokenize(input: string): Token[] {
  const tokens: Token[] = [];
  const push = (kind: Token["kind"], text: string, pos: number, value = 0) =>
    tokens.push({ kind, text, value, pos });
  TOKEN.lastIndex = 0;
  for (let match = TOKEN.exec(input); match !== null; match = TOKEN.exec(input)) {
    const [, number, name, doubleStar, other] = match;
    const pos = match.index + 1;
    if (number !== undefined) {
      const value = Number(number);
      if (!Number.isFinite(value))
        throw new Error(`Number '${clip(number)}' at position ${pos} is too large`);
      push("number", number, pos, value);
    } else if (name !== undefined) push("name", name, pos);
    else if (doubleStar !== undefined) push("op", "^", pos);
    else if (other !== undefined) {
      const op = OPERATOR_ALIASES.get(other) ?? other;
      if ("+-*/%^(),".includes(op)) push("op", op, pos);
      else push("invalid", other, pos);
    }
  }
  push("end", "", input.length + 1);
  return tokens;
}

class Parser {
  private index = 0;
  private depth = 0;

  constructor(private readonly tokens: Token[]) {}

  parse(): Node {
    const node = this.expression();
    const token = this.peek();
    if (token.kind !== "end") {
      if (token.text === ")") throw new Error(`Unmatched closing parenthesis at position ${token.pos}`);
      throw this.unexpected(token);
    }
    return node;
  }

  private peek(): Token {
    return this.tokens[this.index] as Token;
  }

  private next(): Token {
    const token = this.peek();
    if (token.kind !== "end") this.index++;
    return token;
  }

  private isOp(text: string): boolean {
    const token = this.peek();
    return token.kind === "op" && token.text === text;
  }

  private expression(): Node {
    return this.chain(["+", "-"], () => this.term());
  }

  private term(): Node {
    return this.chain(["*", "/", "%"], () => this.unary());
  }

  private chain(ops: string[], operand: () => Node): Node {
    const first = operand();
    const rest: { op: string; pos: number; operand: Node }[] = [];
    for (let token = this.peek(); token.kind === "op" && ops.includes(token.text); token = this.peek()) {
      this.next();
      rest.push({ op: token.text, pos: token.pos, operand: operand() });
    }
    return rest.length === 0 ? first : { kind: "chain", first, rest };
  }

  private unary(): Node {
    if (++this.depth > MAX_NESTING_DEPTH) {
      throw new Error(`Expression is nested too deeply (more than ${MAX_NESTING_DEPTH} levels)`);
    }
    const sign = this.isOp("-") || this.isOp("+") ? this.next().text : "";
    const node: Node =
      sign === "-" ? { kind: "neg", operand: this.unary() } : sign ? this.unary() : this.power();
    this.depth--;
    return node;
  }

  private power(): Node {
    const base = this.primary();
    if (!this.isOp("^")) return base;
    const { pos } = this.next();
    return { kind: "pow", base, exponent: this.unary(), pos };
  }

  private primary(): Node {
    const token = this.next();
    if (token.kind === "number") return { kind: "num", value: token.value };
    if (token.kind === "op" && token.text === "(") {
      const inner = this.expression();
      this.closeParen(token.pos);
      return inner;
    }
    if (token.kind === "name") return this.name(token.text, token.pos);
    if (token.kind === "end") {
      throw new Error(
        `Unexpected end of expression at position ${token.pos}: expected a number, constant, function or '('`,
      );
    }
    throw this.unexpected(token);
  }

  private name(text: string, pos: number): Node {
    const key = text.toLowerCase();
    if (this.isOp("(")) {
      const open = this.next();
      const spec = FUNCTIONS.get(key);
      if (!spec) throw new Error(`Unknown function '${clip(text)}' at position ${pos}`);
      const args: Node[] = [];
      if (!this.isOp(")")) {
        args.push(this.expression());
        while (this.isOp(",")) {
          this.next();
          args.push(this.expression());
        }
      }
      this.closeParen(open.pos);
      const [min, max] = spec.arity;
      if (args.length < min || args.length > max) {
        const expected = min === max ? `${min}` : max === Infinity ? `at least ${min}` : `${min} or ${max}`;
        throw new Error(
          `Function '${key}' at position ${pos} takes ${expected} argument${/\b1$/.test(expected) ? "" : "s"}, got ${args.length}`,
        );
      }
      return { kind: "call", name: key, args, pos };
    }
    const constant = CONSTANTS.get(key);
    if (constant !== undefined) return { kind: "num", value: constant };
    if (FUNCTIONS.has(key)) {
      throw new Error(`Function '${key}' at position ${pos} needs parentheses, e.g. ${key}(2)`);
    }
    throw new Error(`Unknown name '${clip(text)}' at position ${pos}: the constants are pi and e`);
  }

  private closeParen(openPos: number): void {
    if (this.isOp(")")) {
      this.next();
      return;
    }
    const token = this.peek();
    if (token.kind === "end") throw new Error(`Missing closing parenthesis for '(' at position ${openPos}`);
    throw this.unexpected(token);
  }

  private unexpected(token: Token): Error {
    if (token.kind === "invalid")
      return new Error(`Unexpected character '${token.text}' at position ${token.pos}`);
    const what = token.kind === "number" ? "number" : token.kind === "name" ? "name" : "";
    return new Error(`Unexpected ${what ? `${what} ` : ""}'${clip(token.text)}' at position ${token.pos}`);
  }
}

function evaluate(node: Node): number {
  switch (node.kind) {
    case "num":
      return node.value;
    case "neg":
      return -evaluate(node.operand);
    case "pow": {
      const base = evaluate(node.base);
      const exponent = evaluate(node.exponent);
      if (base === 0 && exponent < 0) throw new Error(`Division by zero at position ${node.pos}`);
      return finite(base ** exponent, false);
    }
    case "chain": {
      let value = evaluate(node.first);
      for (const { op, pos, operand } of node.rest) {
        const right = evaluate(operand);
        if ((op === "/" || op === "%") && right === 0) throw new Error(`Division by zero at position ${pos}`);
        value = (BINARY.get(op) as (a: number, b: number) => number)(value, right);
        finite(value, false);
      }
      return value;
    }
    case "call": {
      const spec = FUNCTIONS.get(node.name) as FunctionSpec;
      return finite(spec.fn(...node.args.map(evaluate)), spec.infiniteIsUndefined === true);
    }
  }
}

/** Rejects NaN and infinities: the calculator only ever answers with real, finite numbers. */
function finite(value: number, infiniteIsUndefined: boolean): number {
  if (Number.isNaN(value) || (infiniteIsUndefined && !Number.isFinite(value))) {
    throw new Error("Result is not a real number");
  }
  if (!Number.isFinite(value)) throw new Error("Result is too large");
  return value;
}

/** Shortens user text quoted in an error so the message stays one short line. */
function clip(text: string): string {
  return text.length > 32 ? `${text.slice(0, 32)}…` : text;
}

/**
 * Evaluates an arithmetic expression. Returns a finite number.
 * @throws Error with a one-line message naming the problem (and its 1-based position when it has one).
 */
export function evaluateExpression(expression: string): number {
  if (typeof expression !== "string") throw new Error("Expression must be a string");
  if (expression.length > MAX_EXPRESSION_LENGTH) {
    throw new Error(
      `Expression is too long (${expression.length} characters; the limit is ${MAX_EXPRESSION_LENGTH})`,
    );
  }
  if (expression.trim() === "") throw new Error("Empty expression");
  const value = evaluate(new Parser(tokenize(expression)).parse());
  return value === 0 ? 0 : value; // normalises -0
}

/**
 * Prints a number without binary floating-point noise: 15 significant digits, no trailing
 * zeros, no `-0`, plain notation for 1e-6 <= |n| < 1e21. Safe integers print exactly.
 */
export function formatNumber(n: number): string {
  if (!Number.isFinite(n)) return String(n);
  if (Number.isSafeInteger(n)) return String(n === 0 ? 0 : n);
  const rounded = Number.parseFloat(n.toPrecision(15));
  return String(Object.is(rounded, -0) ? 0 : rounded);
}

export const calculator: Tool = lazyTool({
  name: "calculator",
  description:
    "Evaluates an arithmetic expression and returns the exact numeric result. Use it for any " +
    "arithmetic instead of computing in your head. Supports + - * / % (remainder) ^ (power), " +
    "parentheses, unary minus, decimals and scientific notation (1e3), the constants pi and e, and " +
    "the functions sqrt, abs, round(x[, digits]), floor, ceil, sin, cos, tan, asin, acos, atan " +
    "(radians), log (base 10), ln, log2, exp, min, max, pow(a, b).",
  parameters: {
    type: "object",
    properties: {
      expression: {
        type: "string",
        description: "The arithmetic expression to evaluate, e.g. '157.09 * 493.89' or 'sqrt(2) * (3 + 4)^2'",
      },
    },
    required: ["expression"],
  },
  schema: (z) => z.object({ expression: z.string() }),
  execute: ({ expression }) => formatNumber(evaluateExpression(expression)),
});
