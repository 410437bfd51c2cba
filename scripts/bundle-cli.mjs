// Bundles the compiled CLI (dist/cli/main.js, run after tsc) into dist/cli-bundle/, which the
// package's bin imports: one file to read and compile instead of hundreds (the openai SDK alone
// has over 200) makes `agentloop run` send its first request tens of milliseconds sooner.
// Code splitting keeps what the commands import lazily (providers, MCP, the server, the stores)
// in chunks loaded only when a command needs them. dist/cli-bundle/ is as deep as dist/cli/, so
// main's `new URL("../../package.json", import.meta.url)` still finds the package.json.
import { readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const root = fileURLToPath(new URL("..", import.meta.url));
const outdir = join(root, "dist/cli-bundle");
rmSync(outdir, { recursive: true, force: true }); // no chunk of an earlier build left behind

const result = await build({
  absWorkingDir: root,
  entryPoints: ["dist/cli/main.js"],
  outdir,
  bundle: true,
  splitting: true,
  format: "esm",
  platform: "node",
  target: "node22",
  // Loaded from node_modules as they are, not bundled:
  // - zod: src/tools/zod.ts loads it lazily, and a user's schemas must meet the same instance;
  // - pg: optional native parts; gpt-tokenizer: required by a computed path (src/memory/tokens.ts);
  // - cross-spawn (for MCP stdio servers): CommonJS that require()s Node.js modules, which an ES
  //   module bundle cannot do (esbuild's require shim throws there).
  external: ["zod", "pg", "gpt-tokenizer", "cross-spawn"],
  // Readable output: each module keeps a `// dist/...` or `// node_modules/...` comment naming it
  // (test/cli-startup.test.ts reads them to see which modules a command loads).
  minify: false,
  legalComments: "eof",
  metafile: true,
  logLevel: "warning",
});

// Any other require() of a package or Node.js module left in the bundle would throw the same way
// at run time, and only when that code runs: refuse to build instead.
const requires = Object.entries(result.metafile.inputs).flatMap(([file, input]) =>
  input.imports
    .filter((i) => (i.kind === "require-call" || i.kind === "require-resolve") && i.external)
    .map((i) => `${file}: ${i.path}`),
);
if (requires.length > 0) {
  throw new Error(
    `require() of external modules in the CLI bundle (mark them external):\n${requires.join("\n")}`,
  );
}

// The bundle holds the code of the packages in it: ship their licences with it.
const packageDirs = new Set(
  Object.keys(result.metafile.inputs).flatMap(
    (file) => /^(.*node_modules\/(@[^/]+\/)?[^/]+)\//.exec(file)?.[1] ?? [],
  ),
);
const notices = [...packageDirs].sort().map((packageDir) => {
  const dir = join(root, packageDir);
  const { name, version, license } = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
  const files = readdirSync(dir).filter((f) => /^(licen[cs]e|copying|notice)/i.test(f));
  const texts = files.map((f) => readFileSync(join(dir, f), "utf8").trim());
  return `${name}@${version} (${license})\n\n${texts.join("\n\n") || "(no licence file in the package)"}`;
});
writeFileSync(
  join(outdir, "THIRD_PARTY_LICENSES.txt"),
  `The CLI bundle in this folder contains code from these packages.\n\n${notices.join(`\n\n${"-".repeat(72)}\n\n`)}\n`,
);
