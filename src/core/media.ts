/**
 * Images and audio as plain data (`MediaPart`: a type and a URL, inline bytes as a `data:` URL):
 * reading, checking and describing them without decoding more than a few bytes.
 */
import { AgentloopError } from "./errors.js";
import type { ImageInput, MediaPart, UserInput, UserMessage } from "./messages.js";

/** The largest image or audio clip sent to a model, decoded: 5 MiB, Anthropic's limit per image. */
export const DEFAULT_MAX_MEDIA_BYTES = 5 * 1024 * 1024;

/** The image formats both OpenAI and Anthropic read. */
const IMAGE_SIGNATURES: readonly (readonly [string, (b: Uint8Array) => boolean])[] = [
  ["image/png", (b) => b[0] === 0x89 && b[1] === 0x50 && b[2] === 0x4e && b[3] === 0x47],
  ["image/jpeg", (b) => b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff],
  ["image/gif", (b) => b[0] === 0x47 && b[1] === 0x49 && b[2] === 0x46 && b[3] === 0x38],
  ["image/webp", (b) => ascii(b, 0, 4) === "RIFF" && ascii(b, 8, 12) === "WEBP"],
];

const ascii = (b: Uint8Array, from: number, to: number) => String.fromCharCode(...b.subarray(from, to));

/** The image type of these bytes (PNG, JPEG, GIF or WebP), or undefined. */
function sniffImageType(bytes: Uint8Array): string | undefined {
  return IMAGE_SIGNATURES.find(([, matches]) => matches(bytes))?.[0];
}

/** A `data:` URL's media type and base64 payload; undefined for any other URL or a data URL that is not base64. */
export function parseDataUrl(url: string): { mediaType: string; data: string } | undefined {
  if (!url.startsWith("data:")) return undefined;
  const comma = url.indexOf(",");
  if (comma < 0) return undefined;
  const header = url.slice(5, comma);
  if (!/;base64$/i.test(header)) return undefined;
  return { mediaType: (header.split(";")[0] ?? "").toLowerCase(), data: url.slice(comma + 1) };
}

export function dataUrl(mediaType: string, base64: string): string {
  return `data:${mediaType};base64,${base64}`;
}

/** Decoded size of base64 text, without decoding it. */
export function base64Bytes(data: string): number {
  const clean = /\s/.test(data) ? data.replace(/\s+/g, "") : data;
  const padding = clean.endsWith("==") ? 2 : clean.endsWith("=") ? 1 : 0;
  return Math.max(0, Math.floor((clean.length * 3) / 4) - padding);
}

export function formatSize(bytes: number): string {
  if (bytes < 1024) return `${bytes} bytes`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / (1024 * 1024)).toFixed(1)} MB`;
}

/**
 * What logs, events and transcripts show for a part: `[image: image/png, 2.1 KB]`, or for a URL
 * only its origin (`[image: https://example.com/…]`: a signed URL's path and query may be secret).
 */
export function describeMedia(part: MediaPart): string {
  const inline = parseDataUrl(part.url);
  if (inline) return `[${part.type}: ${inline.mediaType}, ${formatSize(base64Bytes(inline.data))}]`;
  let origin = "URL";
  try {
    const url = new URL(part.url);
    origin = `${url.protocol}//${url.host}/…`;
  } catch {}
  return `[${part.type}: ${origin}]`;
}

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** The first bytes of base64 text (enough to tell an image format). */
function head(base64: string): Uint8Array {
  return Buffer.from(base64.slice(0, 24), "base64");
}

/**
 * Checks an inline part before it goes to a model: an image must be PNG, JPEG, GIF or WebP (read
 * from its bytes; the declared type is corrected to it, as providers refuse a mismatch) and at most
 * `maxBytes`; an http(s) URL passes as is (the provider fetches and checks it). Returns the part to
 * send, or a problem in a few words ("over the 5.0 MB limit", ...). Decodes only a few bytes.
 */
export function checkMedia(part: MediaPart, maxBytes: number): { part: MediaPart } | { problem: string } {
  if (/^https?:\/\//i.test(part.url)) return { part };
  const inline = parseDataUrl(part.url);
  if (!inline) return { problem: "not an http(s) URL or a base64 data: URL" };
  const bytes = base64Bytes(inline.data);
  if (bytes > maxBytes) {
    return { problem: `${formatSize(bytes)}, over the ${formatSize(maxBytes)} limit` };
  }
  if (part.type === "audio") return { part };
  const type = sniffImageType(head(inline.data));
  if (!type) return { problem: "not a PNG, JPEG, GIF or WebP image" };
  return { part: type === inline.mediaType ? part : { type: "image", url: dataUrl(type, inline.data) } };
}

/**
 * One image input as a `MediaPart` (bytes and base64 become a `data:` URL).
 * @throws AgentloopError("invalid_image" or "image_too_large") naming `label` and the fix.
 */
export function imagePart(input: ImageInput, label: string, maxBytes: number): MediaPart {
  const { image } = input;
  let url: string;
  if (image instanceof Uint8Array) {
    const type = input.mediaType ?? sniffImageType(image.subarray(0, 16)) ?? "application/octet-stream";
    url = dataUrl(type, Buffer.from(image.buffer, image.byteOffset, image.byteLength).toString("base64"));
  } else {
    const text = image instanceof URL ? image.href : image.trim();
    if (/^(https?:|data:)/i.test(text)) url = text;
    else if (/^[a-z][a-z0-9+.-]*:/i.test(text) && !BASE64.test(text)) {
      throw new AgentloopError(
        "invalid_image",
        `${label}: ${text.split(":")[0]}: URLs cannot be sent to a model; pass an http(s) URL, a data: URL or the image's bytes.`,
      );
    } else {
      const clean = text.replace(/\s+/g, "");
      if (!BASE64.test(clean)) {
        throw new AgentloopError(
          "invalid_image",
          `${label} is neither a URL nor base64 data: pass an http(s) URL, a data: URL, base64 text or the bytes.`,
        );
      }
      url = dataUrl(input.mediaType ?? sniffImageType(head(clean)) ?? "application/octet-stream", clean);
    }
  }
  const checked = checkMedia({ type: "image", url }, maxBytes);
  if ("part" in checked) return checked.part;
  const tooLarge = checked.problem.includes("limit");
  throw new AgentloopError(
    tooLarge ? "image_too_large" : "invalid_image",
    tooLarge
      ? `${label} is ${checked.problem} for an image: send a smaller or downscaled image.`
      : `${label} is ${checked.problem}: send a PNG, JPEG, GIF or WebP image, as bytes, base64, a data: URL or an http(s) URL.`,
  );
}

/**
 * A run's input as its user message: the text parts joined by blank lines, the images checked
 * (see `imagePart`) and kept in order.
 * @throws AgentloopError for an image that cannot be sent (see `imagePart`) or a part of no known type.
 */
export function userMessage(input: UserInput, maxBytes: number): UserMessage {
  if (typeof input === "string") return { role: "user", content: input };
  const texts: string[] = [];
  const media: MediaPart[] = [];
  for (const part of input) {
    if (part.type === "text") texts.push(part.text);
    else if (part.type === "image") media.push(imagePart(part, `Image ${media.length + 1}`, maxBytes));
    else {
      const type = String((part as { type?: unknown }).type);
      throw new AgentloopError("invalid_input", `Input part of type '${type}': use 'text' or 'image'.`);
    }
  }
  const message: UserMessage = { role: "user", content: texts.join("\n\n") };
  if (media.length > 0) message.media = media;
  return message;
}
