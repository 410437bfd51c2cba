import { describe, expect, it } from "vitest";
import { type XmlDelta, XmlReplyParser } from "./xml-parser.js";

interface Parsed {
  text: string;
  thinking: string;
  deltas: XmlDelta[];
  blocks: XmlReplyParser["blocks"];
}

function parse(chunks: readonly string[]): Parsed {
  const parser = new XmlReplyParser();
  const deltas: XmlDelta[] = [];
  for (const chunk of chunks) deltas.push(...parser.push(chunk));
  deltas.push(...parser.end());
  return { text: parser.text, thinking: parser.thinking, deltas, blocks: parser.blocks };
}

/** Every way to cut `input` into two or three pieces, plus fixed chunk sizes. */
function* splits(input: string): Generator<string[]> {
  yield [input];
  for (let size = 1; size <= 7; size++) {
    const chunks: string[] = [];
    for (let i = 0; i < input.length; i += size) chunks.push(input.slice(i, i + size));
    yield chunks;
  }
  for (let a = 1; a < input.length; a++) {
    yield [input.slice(0, a), input.slice(a)];
    for (let b = a + 1; b < input.length; b += 3)
      yield [input.slice(0, a), input.slice(a, b), input.slice(b)];
  }
}

function joined(deltas: readonly XmlDelta[], type: XmlDelta["type"]): string {
  return deltas
    .filter((d) => d.type === type)
    .map((d) => d.text)
    .join("");
}

/** Parses `input` at every split and checks all give the same result, whose deltas add up. */
function parseAllWays(input: string): Parsed {
  const whole = parse([input]);
  for (const chunks of splits(input)) {
    const result = parse(chunks);
    expect(result.text, JSON.stringify(chunks)).toBe(whole.text);
    expect(result.thinking, JSON.stringify(chunks)).toBe(whole.thinking);
    expect(result.blocks, JSON.stringify(chunks)).toEqual(whole.blocks);
    expect(joined(result.deltas, "text")).toBe(result.text);
    expect(joined(result.deltas, "thinking")).toBe(result.thinking);
  }
  return whole;
}

describe("XmlReplyParser", () => {
  it("separates text, thinking and tool blocks at every chunk boundary", () => {
    const input =
      'Let me add.\n<thinking>2 and 3</thinking>\n<tool>{"tool_name":"add","arguments":{"a":2,"b":3}}</tool>\nDone.';
    const result = parseAllWays(input);
    expect(result.text).toBe("Let me add.\nDone.");
    expect(result.thinking).toBe("2 and 3");
    expect(result.blocks).toEqual([
      {
        raw: '{"tool_name":"add","arguments":{"a":2,"b":3}}',
        parts: [{ cdata: false, text: '{"tool_name":"add","arguments":{"a":2,"b":3}}' }],
        closed: true,
        inString: false,
      },
    ]);
  });

  it("streams text before a block immediately, holding back only a possible tag start", () => {
    const parser = new XmlReplyParser();
    expect(parser.push("Hello <")).toEqual([{ type: "text", text: "Hello" }]);
    expect(parser.push("to")).toEqual([]);
    expect(parser.push("ol>{")).toEqual([]);
    expect(parser.push("}</tool> and <b>bold</b> a < b")).toEqual([
      { type: "text", text: " and <b>bold</b> a < b" },
    ]);
    expect(parser.end()).toEqual([]);
    expect(parser.blocks).toHaveLength(1);
  });

  it("streams thinking incrementally", () => {
    const parser = new XmlReplyParser();
    expect(parser.push("<think")).toEqual([]);
    expect(parser.push("ing>step one")).toEqual([{ type: "thinking", text: "step one" }]);
    expect(parser.push(", two</thin")).toEqual([{ type: "thinking", text: ", two" }]);
    expect(parser.push("king>Answer")).toEqual([{ type: "text", text: "Answer" }]);
  });

  it("passes a lone '<', other tags and stray close tags through as text", () => {
    for (const input of [
      "a < b",
      "<b>bold</b>",
      "x <",
      "ends with <too",
      "<toolbox> and </tool>",
      "<thinkin",
    ]) {
      const result = parseAllWays(input);
      expect(result.text).toBe(input.trim());
      expect(result.blocks).toEqual([]);
    }
  });

  it("does not close a block on </tool> inside a JSON string, escapes included", () => {
    const json = String.raw`{"tool_name":"echo","arguments":{"s":"a </tool> \" </tool> \\"}}`;
    const result = parseAllWays(`<tool>${json}</tool>after`);
    expect(result.text).toBe("after");
    expect(result.blocks).toHaveLength(1);
    expect(result.blocks[0]?.raw).toBe(json);
    expect(JSON.parse(result.blocks[0]?.raw ?? "")).toEqual({
      tool_name: "echo",
      arguments: { s: 'a </tool> " </tool> \\' },
    });
  });

  it("treats CDATA as opaque and records it without its wrapper", () => {
    const input = '<tool><![CDATA[{"tool_name":"x","arguments":{"s":"]] </tool> \\""}}]]></tool>!';
    const result = parseAllWays(input);
    expect(result.text).toBe("!");
    expect(result.blocks[0]?.parts).toEqual([
      { cdata: true, text: '{"tool_name":"x","arguments":{"s":"]] </tool> \\""}}' },
    ]);
    expect(result.blocks[0]?.closed).toBe(true);
  });

  it("reports an unclosed block and keeps unclosed thinking as thinking", () => {
    const unclosed = parseAllWays('Hi <tool>{"tool_name":"add"');
    expect(unclosed.text).toBe("Hi");
    expect(unclosed.blocks).toMatchObject([{ raw: '{"tool_name":"add"', closed: false, inString: false }]);
    const inString = parseAllWays('<tool>{"tool_name":"add}</tool>');
    expect(inString.blocks).toMatchObject([{ closed: false, inString: true }]);
    const thinking = parseAllWays("<thinking>still thinking</thin");
    expect(thinking.thinking).toBe("still thinking</thin");
    expect(thinking.text).toBe("");
  });

  it("tidies whitespace around removed blocks", () => {
    expect(parseAllWays("Hello <thinking>x</thinking> world").text).toBe("Hello world");
    expect(parseAllWays("A\n\n<tool>{}</tool>\nB").text).toBe("A\n\nB");
    expect(parseAllWays("A<tool>{}</tool>B").text).toBe("AB");
    expect(parseAllWays("  <tool>{}</tool>\n<tool>{}</tool>\n").text).toBe("");
    expect(parseAllWays("keep  inner\n\n spacing ").text).toBe("keep  inner\n\n spacing");
    expect(parseAllWays("<thinking> one </thinking> <thinking>two\n</thinking>").thinking).toBe("one\ntwo");
  });

  it("joins the provider's own thinking and <thinking> text", () => {
    const parser = new XmlReplyParser();
    parser.passThinking("native.");
    expect(parser.push("<thinking>tagged</thinking>")).toEqual([{ type: "thinking", text: "\ntagged" }]);
    expect(parser.thinking).toBe("native.\ntagged");
  });
});
