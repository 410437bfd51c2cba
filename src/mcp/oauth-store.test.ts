import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { fileTokenStore, TokenStoreError } from "./oauth-store.js";

let directory: string;
afterEach(() => rmSync(directory, { recursive: true, force: true }));

/** What `run` rejects with, as the fields a caller branches on. */
async function failure(run: () => Promise<unknown>) {
  const error = await run().then(
    () => expect.unreachable(),
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(TokenStoreError);
  const { name, code, reason, fix } = error as TokenStoreError;
  return { name, code, reason, fix };
}

describe("fileTokenStore's errors", () => {
  it("carry a code, the file in `reason` and the fix", async () => {
    directory = mkdtempSync(join(tmpdir(), "agentloop-tokens-"));
    const store = fileTokenStore({ directory });
    await store.save("a", { url: "https://a.example/mcp" });
    const file = join(directory, readdirSync(directory)[0] as string);

    writeFileSync(file, "not json");
    expect(await failure(() => store.load("a"))).toEqual({
      name: "TokenStoreError",
      code: "corrupt_token_file",
      reason: `the token file ${file} is not one agentloop wrote`,
      fix: "Delete it",
    });

    rmSync(file);
    mkdirSync(file);
    expect(await failure(() => store.load("a"))).toMatchObject({ code: "token_file_is_directory" });
    expect(await failure(() => store.save("a", { url: "https://a.example/mcp" }))).toMatchObject({
      code: "token_file_is_directory",
    });
  });
});
