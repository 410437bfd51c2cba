import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

export type Zod = typeof import("zod").z;

let loaded: Zod | undefined;

/**
 * zod, loaded on first use rather than imported: it costs tens of milliseconds to load, which
 * `import("agentloop-runtime")` and the CLI's start must not pay when no JSON Schema is turned into a
 * validator (a zod schema the caller passes brings its own methods). Loaded as the ES module the
 * caller's `import "zod"` gets (one instance, one schema registry); a Node.js that cannot
 * `require()` an ES module (before 22.12) gets zod's CommonJS build.
 */
export function zod(): Zod {
  if (loaded) return loaded;
  const require = createRequire(import.meta.url);
  let module: typeof import("zod");
  try {
    module = require(fileURLToPath(import.meta.resolve("zod"))) as typeof import("zod");
  } catch {
    module = require("zod") as typeof import("zod");
  }
  loaded = module.z;
  return loaded;
}
