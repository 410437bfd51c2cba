/**
 * Run ids: `run_<uuid>` (a random version 4 UUID), made from a pool of random bytes into one flat
 * string. `crypto.randomUUID()` builds its text from some twenty joined pieces (about 450 bytes
 * that every live run would keep, and several hundred more allocated per id).
 */

const POOL_BYTES = 4096; // 256 ids per refill
const TEXT_LENGTH = 40; // "run_" and 36 characters
const HEX = Buffer.from("0123456789abcdef", "latin1");
let pool: Uint8Array<ArrayBuffer> | undefined;
let used = POOL_BYTES;
const text = Buffer.from("run_00000000-0000-0000-0000-000000000000", "latin1");

export function newRunId(): string {
  if (used === POOL_BYTES) {
    pool ??= new Uint8Array(POOL_BYTES);
    crypto.getRandomValues(pool);
    used = 0;
  }
  const bytes = pool as Uint8Array<ArrayBuffer>;
  const start = used;
  used += 16;
  let at = 4;
  for (let i = 0; i < 16; i++) {
    if (i === 4 || i === 6 || i === 8 || i === 10) at++; // the dash
    let value = bytes[start + i] as number;
    if (i === 6)
      value = (value & 0x0f) | 0x40; // version 4
    else if (i === 8) value = (value & 0x3f) | 0x80; // RFC 4122 variant
    text[at++] = HEX[value >> 4] as number;
    text[at++] = HEX[value & 15] as number;
  }
  return text.toString("latin1", 0, TEXT_LENGTH);
}
