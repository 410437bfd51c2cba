/**
 * The incremental parser behind the xml tool protocol: splits a model's streamed text into
 * visible text, `<thinking>` text and `<tool>` blocks, whatever the chunk boundaries.
 */

const TOOL_OPEN = "<tool>";
const TOOL_CLOSE = "</tool>";
const THINK_OPEN = "<thinking>";
const THINK_CLOSE = "</thinking>";
const CDATA_OPEN = "<![CDATA[";
const CDATA_CLOSE = "]]>";

/** A delta to stream: visible text or thinking. */
export interface XmlDelta {
  type: "text" | "thinking";
  text: string;
}

/** One `<tool>` block as written. */
export interface ToolBlock {
  /** Everything between `<tool>` and `</tool>`, exactly as written. */
  raw: string;
  /** The content split at CDATA sections; `cdata` parts are without their wrapper. */
  parts: { cdata: boolean; text: string }[];
  /** Whether `</tool>` was seen. */
  closed: boolean;
  /** Whether the block ended inside a JSON string (only meaningful when not closed). */
  inString: boolean;
}

/**
 * Joins visible pieces across removed blocks: whitespace inside a run of text is kept as
 * written, leading and trailing whitespace is dropped, and the whitespace around a removed
 * block collapses to a blank line, a newline or a space (whichever is the largest beside it).
 * Trailing whitespace is held back until more text follows, so the deltas add up to `out`.
 */
class Tidy {
  out = "";
  private gaps: string[] = [""];

  /** @param minGap the separator across a removed block when the whitespace there has no newline. */
  constructor(private readonly minGap: string) {}

  push(text: string): string {
    const start = text.search(/\S/);
    if (start < 0) {
      this.gaps[this.gaps.length - 1] += text;
      return "";
    }
    this.gaps[this.gaps.length - 1] += text.slice(0, start);
    const body = text.slice(start).trimEnd();
    const emitted = (this.out === "" ? "" : this.gap()) + body;
    this.gaps = [text.slice(start + body.length)];
    this.out += emitted;
    return emitted;
  }

  /** Text that streams unchanged (a provider's own thinking). */
  passthrough(text: string): void {
    if (text === "") return;
    this.out += text;
    this.gaps = [""];
  }

  /** A block was removed here. */
  boundary(): void {
    this.gaps.push("");
  }

  private gap(): string {
    if (this.gaps.length === 1) return this.gaps[0] ?? "";
    const newlines = Math.max(...this.gaps.map((g) => g.split("\n").length - 1));
    const gap = newlines >= 2 ? "\n\n" : newlines === 1 ? "\n" : this.gaps.some((g) => g) ? " " : "";
    return this.minGap !== "" && !gap.includes("\n") ? this.minGap : gap;
  }
}

/** Whether `buf` from `i` to its end is a proper prefix of one of `tags` (so more input may complete it). */
function partialTag(buf: string, i: number, tags: readonly string[]): boolean {
  const rest = buf.slice(i);
  return tags.some((tag) => rest.length < tag.length && tag.startsWith(rest));
}

/**
 * Feed it text chunks with `push`, then call `end` once; each call returns the deltas to
 * stream now. Only the few characters that could start a tag are held back between chunks.
 * Inside a `<tool>` block, `</tool>` closes the block only outside JSON strings and CDATA.
 */
export class XmlReplyParser {
  readonly blocks: ToolBlock[] = [];
  private mode: "text" | "thinking" | "tool" = "text";
  private pending = "";
  private readonly visible = new Tidy("");
  private readonly thoughts = new Tidy("\n");
  private deltas: XmlDelta[] = [];
  // Tool block state.
  private block: ToolBlock | undefined;
  private part = "";
  private inCdata = false;
  private escaped = false;

  /** The visible text so far (what the text deltas add up to). */
  get text(): string {
    return this.visible.out;
  }

  /** The thinking so far: the provider's own and the `<thinking>` blocks' text. */
  get thinking(): string {
    return this.thoughts.out;
  }

  push(chunk: string): XmlDelta[] {
    this.pending += chunk;
    this.scan(false);
    return this.take();
  }

  /** The provider's own thinking, streamed unchanged; recorded so the reply's thinking is complete. */
  passThinking(text: string): void {
    this.thoughts.passthrough(text);
  }

  /** The end of the reply: flushes held characters and closes what is open. */
  end(): XmlDelta[] {
    this.scan(true);
    if (this.mode === "tool" && this.block) this.finishBlock(false);
    this.mode = "text";
    return this.take();
  }

  private take(): XmlDelta[] {
    const deltas = this.deltas;
    this.deltas = [];
    return deltas;
  }

  private emit(type: XmlDelta["type"], text: string): void {
    const out = (type === "text" ? this.visible : this.thoughts).push(text);
    if (out === "") return;
    const last = this.deltas.at(-1);
    if (last?.type === type) last.text += out;
    else this.deltas.push({ type, text: out });
  }

  private scan(final: boolean): void {
    const buf = this.pending;
    let i = 0;
    while (i < buf.length) {
      const next = this.mode === "tool" ? this.scanTool(buf, i, final) : this.scanOutside(buf, i, final);
      if (next === undefined) break;
      i = next;
    }
    this.pending = buf.slice(i);
    if (final && this.pending !== "") {
      // Only held tag prefixes can remain; at the end they are plain text (or thinking).
      this.emit(this.mode === "thinking" ? "thinking" : "text", this.pending);
      this.pending = "";
    }
  }

  /** Text or thinking mode. Returns where to continue, or undefined to wait for more input. */
  private scanOutside(buf: string, i: number, final: boolean): number | undefined {
    const type = this.mode === "thinking" ? "thinking" : "text";
    const lt = buf.indexOf("<", i);
    if (lt < 0) {
      this.emit(type, buf.slice(i));
      return buf.length;
    }
    if (lt > i) {
      this.emit(type, buf.slice(i, lt));
      return lt;
    }
    if (this.mode === "thinking") {
      if (buf.startsWith(THINK_CLOSE, lt)) {
        this.mode = "text";
        this.visible.boundary();
        return lt + THINK_CLOSE.length;
      }
      if (!final && partialTag(buf, lt, [THINK_CLOSE])) return undefined;
    } else {
      if (buf.startsWith(TOOL_OPEN, lt)) {
        this.mode = "tool";
        this.visible.boundary();
        this.block = { raw: "", parts: [], closed: false, inString: false };
        this.part = "";
        this.inCdata = false;
        this.escaped = false;
        return lt + TOOL_OPEN.length;
      }
      if (buf.startsWith(THINK_OPEN, lt)) {
        this.mode = "thinking";
        this.visible.boundary();
        this.thoughts.boundary();
        return lt + THINK_OPEN.length;
      }
      if (!final && partialTag(buf, lt, [TOOL_OPEN, THINK_OPEN])) return undefined;
    }
    this.emit(type, "<");
    return lt + 1;
  }

  /** Tool mode: accumulates the block silently, tracking JSON strings and CDATA. */
  private scanTool(buf: string, start: number, final: boolean): number | undefined {
    const block = this.block as ToolBlock;
    let i = start;
    while (i < buf.length) {
      if (this.inCdata) {
        const close = buf.indexOf(CDATA_CLOSE, i);
        if (close >= 0) {
          this.part += buf.slice(i, close);
          block.raw += buf.slice(i, close + CDATA_CLOSE.length);
          block.parts.push({ cdata: true, text: this.part });
          this.part = "";
          this.inCdata = false;
          i = close + CDATA_CLOSE.length;
          continue;
        }
        // Hold back a trailing "]" or "]]" that may be the start of "]]>".
        let end = buf.length;
        if (!final) while (end > i && end > buf.length - 2 && buf[end - 1] === "]") end--;
        this.part += buf.slice(i, end);
        block.raw += buf.slice(i, end);
        return end === buf.length ? end : end === i ? undefined : end;
      }
      const c = buf[i] as string;
      if (block.inString) {
        if (this.escaped) this.escaped = false;
        else if (c === "\\") this.escaped = true;
        else if (c === '"') block.inString = false;
      } else if (c === '"') {
        block.inString = true;
      } else if (c === "<") {
        if (buf.startsWith(TOOL_CLOSE, i)) {
          this.finishBlock(true);
          this.mode = "text";
          return i + TOOL_CLOSE.length;
        }
        if (buf.startsWith(CDATA_OPEN, i)) {
          if (this.part !== "") block.parts.push({ cdata: false, text: this.part });
          this.part = "";
          this.inCdata = true;
          block.raw += CDATA_OPEN;
          i += CDATA_OPEN.length;
          continue;
        }
        if (!final && partialTag(buf, i, [TOOL_CLOSE, CDATA_OPEN])) return i === start ? undefined : i;
      }
      this.part += c;
      block.raw += c;
      i++;
    }
    return i;
  }

  private finishBlock(closed: boolean): void {
    const block = this.block as ToolBlock;
    if (this.part !== "") block.parts.push({ cdata: this.inCdata, text: this.part });
    block.closed = closed;
    this.blocks.push(block);
    this.block = undefined;
    this.part = "";
    this.inCdata = false;
  }
}
