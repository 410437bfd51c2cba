import { describe, expect, it } from "vitest";
import { Agent } from "../index.js";
import { scriptedModel, takeUnusedScripts } from "./scripted-model.js";

describe("a list-scripted model", () => {
  it("reports steps its run never asked for, so the test that made it fails (test/support/scripted-steps.ts)", async () => {
    const model = scriptedModel([{ text: "one" }, { text: "two" }], { id: "two-steps" });
    await new Agent({ model }).run("go");
    expect(takeUnusedScripts()).toEqual([
      "scripted model 'two-steps': 1 of 2 steps were never used (the run ended before them): remove them, or pass { allowUnused: true }.",
    ]);
  });

  it("reports nothing once every step is used, or with allowUnused", async () => {
    await new Agent({ model: scriptedModel([{ text: "one" }]) }).run("go");
    await new Agent({ model: scriptedModel([{ text: "one" }, { text: "two" }], { allowUnused: true }) }).run(
      "go",
    );
    expect(takeUnusedScripts()).toEqual([]);
  });
});
