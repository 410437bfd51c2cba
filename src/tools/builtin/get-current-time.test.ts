import { describe, expect, it } from "vitest";
import { formatTimeInZone, getCurrentTime, resolveTimeZone } from "./get-current-time.js";

const context = () => ({ signal: new AbortController().signal, toolCallId: "t" });
const instant = new Date("2026-11-22T20:48:05.750Z");

describe("formatTimeInZone", () => {
  it.each([
    ["UTC", "2026-11-22T20:48:05+00:00 (UTC, Sunday)"],
    ["Europe/Paris", "2026-11-22T21:48:05+01:00 (Europe/Paris, Sunday)"],
    ["America/New_York", "2026-11-22T15:48:05-05:00 (America/New_York, Sunday)"],
    ["Asia/Tokyo", "2026-11-23T05:48:05+09:00 (Asia/Tokyo, Monday)"],
    ["America/St_Johns", "2026-11-22T17:18:05-03:30 (America/St_Johns, Sunday)"],
    ["Asia/Kathmandu", "2026-11-23T02:33:05+05:45 (Asia/Kathmandu, Monday)"],
  ])("formats the instant in %s", (zone, expected) => {
    expect(formatTimeInZone(instant, zone)).toBe(expected);
  });

  it("follows daylight saving time", () => {
    expect(formatTimeInZone(new Date("2026-07-01T12:00:00Z"), "Europe/Paris")).toBe(
      "2026-07-01T14:00:00+02:00 (Europe/Paris, Wednesday)",
    );
  });

  it("prints midnight as 00, not 24", () => {
    expect(formatTimeInZone(new Date("2026-01-01T00:00:00Z"), "UTC")).toBe(
      "2026-01-01T00:00:00+00:00 (UTC, Thursday)",
    );
  });
});

describe("resolveTimeZone", () => {
  it("defaults to UTC when the zone is missing or blank", () => {
    expect(resolveTimeZone(undefined)).toBe("UTC");
    expect(resolveTimeZone("  ")).toBe("UTC");
  });

  it("fixes the case of a zone name", () => {
    expect(resolveTimeZone("europe/paris")).toBe("Europe/Paris");
    expect(resolveTimeZone(" Europe/Paris ")).toBe("Europe/Paris");
  });

  it("keeps a correctly spelled alias the caller asked for", () => {
    expect(resolveTimeZone("Asia/Kolkata")).toBe("Asia/Kolkata");
  });

  it.each(["Mars/Olympus", "Not a zone", "Europe/", "x".repeat(500)])("rejects %j", (zone) => {
    expect(() => resolveTimeZone(zone)).toThrow(
      /^Unknown time zone '.*': use an IANA name such as Europe\/Paris$/,
    );
  });

  it("names the unknown zone in the message, on one line", () => {
    expect(() => resolveTimeZone("Mars/Olympus")).toThrow(
      "Unknown time zone 'Mars/Olympus': use an IANA name such as Europe/Paris",
    );
    expect(() => resolveTimeZone("Mars\nOlympus")).toThrow("Unknown time zone 'Mars\\nOlympus'");
  });
});

describe("get_current_time tool", () => {
  const shape = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}[+-]\d{2}:\d{2} \((.+), (\w+day)\)$/;

  it("has the fixed name and an optional timezone parameter", () => {
    expect(getCurrentTime.name).toBe("get_current_time");
    const properties = getCurrentTime.parameters.properties as Record<string, { type?: string }>;
    expect(properties.timezone?.type).toBe("string");
    expect(getCurrentTime.parameters.required ?? []).not.toContain("timezone");
  });

  it("validates its arguments, naming the field", () => {
    expect(getCurrentTime.validate({}).ok).toBe(true);
    const bad = getCurrentTime.validate({ timezone: 1 });
    expect(bad.ok).toBe(false);
    if (!bad.ok) expect(bad.message).toContain("timezone");
  });

  it("returns the current time in UTC by default", async () => {
    const before = Date.now();
    const text = String(await getCurrentTime.execute({}, context()));
    expect(text).toMatch(shape);
    expect(text.match(shape)?.[1]).toBe("UTC");
    const stamp = Date.parse(text.slice(0, 25));
    expect(stamp).toBeGreaterThanOrEqual(Math.floor(before / 1000) * 1000);
    expect(stamp).toBeLessThanOrEqual(Date.now());
  });

  it("returns the current time in the requested zone", async () => {
    const text = String(await getCurrentTime.execute({ timezone: "Europe/Paris" }, context()));
    expect(text).toMatch(shape);
    expect(text).toMatch(/[+]0[12]:00 \(Europe\/Paris, /);
  });

  it("throws for an unknown zone", async () => {
    await expect(async () => getCurrentTime.execute({ timezone: "Mars/Olympus" }, context())).rejects.toThrow(
      "Unknown time zone 'Mars/Olympus'",
    );
  });
});
