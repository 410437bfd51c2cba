import { describe, expect, it } from "vitest";
import { cutBefore, echoed, redactSecrets, secretRedactor } from "./redact.js";

const MiB = 1024 * 1024;
const KEY = "sk-proj-Zq8uT1mW4xN7rB0cV3yH6kL9pS2dF5gJ";

describe("redactSecrets in linear time (a quadratic pattern takes half an hour on these)", () => {
  const cases: [string, string][] = [
    ["letters", "a".repeat(MiB)],
    ["asterisks", "*".repeat(MiB)],
    ["key characters", "ab-_9".repeat(MiB / 5)],
    ["letters and short asterisk runs", "abcdef***".repeat(MiB / 9)],
    ["sk- and a long tail", `sk-${"a".repeat(MiB)}`],
    ["sk- and dots", `sk-${".".repeat(MiB)}`],
    ["sk- repeated", "sk-".repeat(MiB / 3)],
    ["Bearer and a long token", `Bearer ${"a".repeat(MiB)}`],
    ["Bearer and spaces", `Bearer${" ".repeat(MiB)}`],
    ["authorization: repeated", "authorization: ".repeat(MiB / 15)],
    ["authorization and spaces", `authorization${" ".repeat(MiB)}`],
    ["x-api-key= repeated", "x-api-key='".repeat(MiB / 11)],
  ];
  for (const [name, text] of cases) {
    it(`1 MiB of ${name}`, () => {
      const out = redactSecrets(text, [KEY]);
      expect(out.length).toBeLessThanOrEqual(text.length + 16);
    });
  }

  it("still redacts what it did", () => {
    expect(redactSecrets(`x ${"a".repeat(50)}****wxyz, key ab****cd and ***`, [])).toBe(
      "x [REDACTED], key [REDACTED] and ***",
    );
    expect(redactSecrets(`${"a".repeat(MiB)}****zz`, []).length).toBe(10);
  });
});

describe("cutting before redacting", () => {
  it("cuts to max (then …) and never leaves a prefix of a secret at the cut", () => {
    const secret = "tok_live_4f9a8b7c6d5e4f3a2b1c";
    const text = `${"x".repeat(90)}${secret}${"y".repeat(MiB)}`;
    for (const max of [91, 100, 119, 120]) {
      const out = redactSecrets(text, [secret], max);
      expect(out).not.toContain(secret.slice(0, 4));
      expect(out.endsWith("…")).toBe(true);
      expect(out.length).toBeLessThanOrEqual(max + 1);
    }
    expect(redactSecrets(text, [secret], 130)).toBe(`${"x".repeat(90)}[REDACTED]${"y".repeat(11)}…`);
  });

  it("cuts before a secret that overlaps another at the cut", () => {
    expect(cutBefore(`0123abcdefgh${"z".repeat(100)}`, 8, ["abcdefgh", "23ab"])).toBe("01");
  });

  it("echoes a long id as a short prefix", () => {
    expect(echoed("x".repeat(MiB))).toBe(`${"x".repeat(80)}…`);
    expect(echoed("call_1")).toBe("call_1");
  });
});

describe("secretRedactor", () => {
  const redactor = secretRedactor(["abc", 'se"cret\\value', KEY]);

  it("ignores short secrets and none at all", () => {
    expect(secretRedactor(["abc", undefined, null, ""])).toBeUndefined();
    expect(redactor?.text("abc")).toBe("abc");
  });

  it("redacts JSON arguments as written or escaped, keeping them JSON", () => {
    const args = JSON.stringify({ key: KEY, other: 'se"cret\\value', n: 1 });
    const shown = redactor?.json(args) ?? "";
    expect(JSON.parse(shown)).toEqual({ key: "[REDACTED]", other: "[REDACTED]", n: 1 });
  });

  it("redacts a secret its JSON arguments spell with escapes (\\u, \\/), in values and keys", () => {
    const u = (c: string) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`;
    const spelt = `${u(KEY[0] as string)}${KEY.slice(1, 10)}${u(KEY[10] as string)}${KEY.slice(11)}`;
    const args = `{"text":"key ${spelt}","list":["${spelt}"],"${spelt}":1,"path":"a\\/b\\n"}`;
    const shown = redactor?.json(args) ?? "";
    expect(shown).not.toContain(KEY.slice(11));
    expect(JSON.parse(shown)).toEqual({
      text: "key [REDACTED]",
      list: ["[REDACTED]"],
      "[REDACTED]": 1,
      path: "a/b\n",
    });
    // Escapes that hide no secret, and text that is not JSON, stay as they were.
    const plain = '{"path":"a\\/b","text":"line\\n"}';
    expect(redactor?.json(plain)).toBe(plain);
    expect(redactor?.json(`{"text":"${spelt}`)).toBe(`{"text":"${spelt}`);
  });

  it("redacts a secret split across streamed pieces, holding back only what could start one", () => {
    const text = `Your key is ${KEY}, and sk-proj is its prefix. ${KEY}`;
    for (const size of [1, 2, 3, 7, 40]) {
      const pieces = redactor?.pieces();
      const shown: string[] = [];
      for (let i = 0; i < text.length; i += size) shown.push(pieces?.push(text.slice(i, i + size)) ?? "");
      shown.push(pieces?.end() ?? "");
      expect(shown.join("")).toBe("Your key is [REDACTED], and sk-proj is its prefix. [REDACTED]");
      for (const piece of shown) expect(piece).not.toContain("sk-proj-Z");
    }
    const pieces = redactor?.pieces();
    expect(pieces?.push("plain text")).toBe("plain text");
    expect(pieces?.push(" ends in s")).toBe(" ends in ");
    expect(pieces?.end()).toBe("s");
  });

  it("is linear on a megabyte piece", () => {
    const pieces = redactor?.pieces();
    expect(pieces?.push("s".repeat(MiB)).length).toBe(MiB - 1);
  });
});
