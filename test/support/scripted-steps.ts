// A list-scripted model whose run ended before all its steps fails the test that made it
// (`allowUnused` opts out): a script says exactly what the run does.
import { afterEach, beforeEach } from "vitest";
import { takeUnusedScripts } from "../../src/testing/scripted-model.js";

// Models made outside a test (at collection, in beforeAll) serve several tests: not checked.
beforeEach(() => {
  takeUnusedScripts();
});

afterEach(() => {
  const unused = takeUnusedScripts();
  if (unused.length > 0) throw new Error(unused.join("\n"));
});
