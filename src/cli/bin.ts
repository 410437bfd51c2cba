#!/usr/bin/env node
// The `agentloop` binary. Written in syntax any Node.js since 14 parses, and loads nothing before
// checking the version: on an older Node.js, one line says what is needed (exit 2).
import module from "node:module";

const major = Number(process.versions.node.split(".")[0]);
if (major < 22) {
  process.stderr.write(
    `agentloop: Node.js 22 or newer is needed (this is Node.js ${process.versions.node}); install it from https://nodejs.org.\n`,
  );
  process.exitCode = 2;
} else {
  // Node.js keeps the compiled code of the CLI and its dependencies on disk (its compile cache, in
  // the temp folder, or NODE_COMPILE_CACHE), so later starts skip most of the parsing.
  module.enableCompileCache?.();
  // The CLI as one bundle (scripts/bundle-cli.mjs, part of `npm run build`): reading and compiling
  // one file instead of hundreds starts it sooner. It runs the same code as ./main.js. (A computed
  // specifier: the bundle exists only in dist/, not next to this source file.)
  const bundle = "../cli-bundle/main.js";
  import(bundle).catch((error) => {
    process.stderr.write(
      `agentloop: cannot start: ${error instanceof Error ? error.message : String(error)}\n`,
    );
    process.exitCode = 1;
  });
}
