// The binary before any command: the Node.js version check, what `--help` loads, and what the
// package ships (run `npm run build` first).
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { builtinModules } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { startFakeOpenAIServer } from "../src/testing/fake-openai-server.js";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as {
  bin: Record<string, string>;
  dependencies: Record<string, string>;
  license: string;
  scripts: Record<string, string>;
};
const BIN = resolve(ROOT, pkg.bin.agentloop as string);

/** The machine's own node, when it is older than 22 (the case the check is for). */
function oldNode(): { path: string; version: string } | string {
  const path = "/usr/bin/node";
  if (!existsSync(path)) return `${path} does not exist`;
  const version = execFileSync(path, ["-p", "process.versions.node"], { encoding: "utf8" }).trim();
  if (Number(version.split(".")[0]) >= 22) return `${path} is Node.js ${version}, not older than 22`;
  return { path, version };
}

describe("agentloop on Node.js older than 22", () => {
  it("says in one line that Node.js 22 is needed and exits 2, before loading anything", (ctx) => {
    const node = oldNode();
    if (typeof node === "string") return ctx.skip(`no old Node.js to try: ${node}`);
    for (const args of [["--help"], ["run", "hi"]]) {
      const run = spawnSync(node.path, [BIN, ...args], { encoding: "utf8", env: { PATH: "/usr/bin:/bin" } });
      expect(run.status).toBe(2);
      expect(run.stdout).toBe("");
      expect(run.stderr).toBe(
        `agentloop: Node.js 22 or newer is needed (this is Node.js ${node.version}); install it from https://nodejs.org.\n`,
      );
    }
  });

  it("makes `npm test` fail with one line instead of a crash inside vitest", (ctx) => {
    const node = oldNode();
    if (typeof node === "string") return ctx.skip(`no old Node.js to try: ${node}`);
    const run = spawnSync("sh", ["-c", pkg.scripts.pretest as string], {
      encoding: "utf8",
      env: { PATH: `${dirname(node.path)}:/bin` },
    });
    expect(run.status).toBe(1);
    expect(run.stderr).toBe(
      `agentloop: npm test needs Node.js 22 or newer (this is Node.js ${node.version}).\n`,
    );
  });
});

/** The CLI unbundled: what tsc builds, which the bundle is made of. */
const MAIN = join(ROOT, "dist/cli/main.js");

/**
 * What a command loads, relative to the project: the files (recorded by a module hook in the child
 * process) and the modules in them. A file of the CLI bundle (dist/cli-bundle/) holds many modules,
 * each under a comment naming it (`// dist/cli/run.js`, `// node_modules/openai/client.mjs`).
 */
async function loadedModules(
  args: string[],
  env: Record<string, string> = {},
): Promise<{ files: string[]; modules: string[] }> {
  const file = join(mkdtempSync(join(tmpdir(), "agentloop-loads-")), "loads.txt");
  const hook = `
    import { registerHooks } from "node:module";
    import { writeFileSync } from "node:fs";
    const seen = [];
    registerHooks({ resolve(specifier, context, next) { const r = next(specifier, context); seen.push(r.url); return r; } });
    process.on("exit", () => writeFileSync(${JSON.stringify(file)}, seen.join("\\n")));`;
  // Asynchronous: the command may talk to a fake server of this process.
  const child = spawn(
    process.execPath,
    ["--import", `data:text/javascript,${encodeURIComponent(hook)}`, BIN, ...args],
    {
      env: { PATH: process.env.PATH ?? "", ...env },
      stdio: "ignore",
    },
  );
  await new Promise((resolve) => child.on("close", resolve));
  const files = [
    ...new Set(
      readFileSync(file, "utf8")
        .split("\n")
        .filter((url) => url.startsWith("file:"))
        .map((url) => fileURLToPath(url).slice(ROOT.length)),
    ),
  ];
  const modules = files.flatMap((path) =>
    path.startsWith("dist/cli-bundle/")
      ? [...readFileSync(join(ROOT, path), "utf8").matchAll(/^\/\/ ((?:dist|node_modules)\/\S+)$/gm)].map(
          (m) => m[1] as string,
        )
      : [path],
  );
  return { files, modules };
}

/** The packages among loaded paths, e.g. "openai" for node_modules/openai/client.mjs. */
const packagesOf = (paths: string[]) =>
  [...new Set(paths.flatMap((path) => /^node_modules\/((@[^/]+\/)?[^/]+)\//.exec(path)?.[1] ?? []))].sort();

describe("agentloop start-up", () => {
  it.each(["--help", "--version", "run --help"])(
    "`agentloop %s` loads only commander and the CLI entry",
    async (command) => {
      const { files, modules } = await loadedModules(command.split(" "));
      // The bin, then the bundle: no file of dist/ outside it, none of node_modules.
      expect(files).toContain("dist/cli-bundle/main.js");
      expect(files.filter((path) => !/^dist\/cli\/bin\.js$|^dist\/cli-bundle\//.test(path))).toEqual([]);
      expect(modules).toContain("dist/cli/main.js");
      const others = modules.filter(
        (path) =>
          !/^(dist\/cli\/(bin|main|render|exit|tracing-env)\.js|dist\/core\/errors\.js|node_modules\/commander\/.*)$/.test(
            path,
          ),
      );
      expect(others).toEqual([]);
    },
  );

  it("loads a command's modules when the command runs", async () => {
    const { modules } = await loadedModules(["run", "hi"]); // no API key: exits 2 after loading `run`
    expect(modules).toContain("dist/cli/run.js");
    expect(modules.some((path) => path.startsWith("dist/models/openai-chat"))).toBe(false);
    expect(modules.some((path) => path.startsWith("dist/server/"))).toBe(false);
  });

  it("`agentloop run` without MCP servers loads only commander, the provider's SDK and the OpenTelemetry API, all from the bundle: no zod, MCP SDK, tokenizer or tracing SDK", async () => {
    const server = await startFakeOpenAIServer({ respond: [{ text: "hello" }] });
    try {
      const env = { OPENAI_BASE_URL: server.url, OPENAI_API_KEY: "sk-test", AGENTLOOP_MODEL: "gpt-4o-mini" };
      const { files, modules } = await loadedModules(["run", "hi"], env);
      expect(server.requests).toHaveLength(1);
      expect(packagesOf(modules)).toEqual(["@opentelemetry/api", "commander", "openai"]);
      expect(packagesOf(files)).toEqual([]); // not one file read from node_modules
    } finally {
      await server.close();
    }
  });

  it("runs the same through the package's bin (the bundle) and through dist/cli/main.js", () => {
    for (const args of [
      ["--version"],
      ["--help"],
      ["run", "--help"],
      ["run", "--max-iterations", "0", "hi"],
    ]) {
      const viaBin = spawnSync(process.execPath, [BIN, ...args], { encoding: "utf8", env: {} });
      const viaMain = spawnSync(process.execPath, [MAIN, ...args], { encoding: "utf8", env: {} });
      expect(viaBin.stdout + viaBin.stderr).not.toBe("");
      expect(viaBin).toMatchObject({
        status: viaMain.status,
        stdout: viaMain.stdout,
        stderr: viaMain.stderr,
      });
    }
    expect(spawnSync(process.execPath, [BIN, "--version"], { encoding: "utf8" }).stdout).toMatch(
      /^\d+\.\d+\.\d+\n$/,
    );
  });

  it("the CLI bundle imports only Node.js modules and the dependencies left out of it", () => {
    const dir = join(ROOT, "dist/cli-bundle");
    const specifiers = new Set(
      readdirSync(dir)
        .filter((name) => name.endsWith(".js"))
        .flatMap((name) =>
          // `import ... from "x";` (or `} from "x";` ending one over several lines), `import "x";`, `import("x")`
          [
            ...readFileSync(join(dir, name), "utf8").matchAll(
              /^(?:(?:import|export|\}).* from "([^"]+)";|import "([^"]+)";)$|\bimport\("([^"]+)"\)/gm,
            ),
          ].map((m) => (m[1] ?? m[2] ?? m[3]) as string),
        ),
    );
    expect(specifiers).toContain("node:fs");
    // Node.js modules with or without `node:` (the OpenTelemetry exporters import "http", "zlib"...).
    const external = [...specifiers].filter(
      (s) => !s.startsWith("node:") && !builtinModules.includes(s) && !s.startsWith("./"),
    );
    const packages = [...new Set(external.map((s) => /^(@[^/]+\/)?[^/]+/.exec(s)?.[0] as string))].sort();
    // Each is a dependency, so an installed agentloop finds it; the rest of the CLI is in the bundle.
    expect(packages).toEqual(["cross-spawn", "pg", "zod"]);
    for (const name of packages) expect(pkg.dependencies).toHaveProperty([name]);
  });
});

describe("the published package", () => {
  const packed = () => {
    const out = execFileSync("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], {
      cwd: ROOT,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "ignore"],
    });
    const [info] = JSON.parse(out) as { files: { path: string }[] }[];
    return new Set(info?.files.map((f) => f.path));
  };

  it("has an MIT LICENSE matching package.json", () => {
    expect(pkg.license).toBe("MIT");
    expect(readFileSync(join(ROOT, "LICENSE"), "utf8")).toMatch(/^MIT License\n/);
    expect(packed().has("LICENSE")).toBe(true);
  });

  it("ships no source map that points at a file outside the package", () => {
    const files = packed();
    expect(files.has("dist/cli/main.js")).toBe(true);
    expect(files.has("dist/cli-bundle/main.js")).toBe(true);
    expect(files.has("dist/cli-bundle/THIRD_PARTY_LICENSES.txt")).toBe(true);
    expect(files.has(pkg.bin.agentloop?.replace(/^\.\//, "") as string)).toBe(true);
    const dangling: string[] = [];
    for (const path of files) {
      if (path.endsWith(".js") || path.endsWith(".d.ts")) {
        const url = /\/\/# sourceMappingURL=(\S+)\s*$/.exec(readFileSync(join(ROOT, path), "utf8"))?.[1];
        if (url && !url.startsWith("data:") && !files.has(join(dirname(path), url)))
          dangling.push(`${path} -> ${url}`);
      }
      if (path.endsWith(".map")) {
        const map = JSON.parse(readFileSync(join(ROOT, path), "utf8")) as {
          sources: string[];
          sourcesContent?: (string | null)[];
        };
        map.sources.forEach((source, i) => {
          if (!map.sourcesContent?.[i] && !files.has(join(dirname(path), source))) {
            dangling.push(`${path} -> ${source}`);
          }
        });
      }
    }
    expect(dangling).toEqual([]);
  });
});
