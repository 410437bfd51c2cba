// The package as another project gets it: `npm pack` (what `npm publish` uploads), unpacked into
// a fresh project's node_modules as `npm install <tarball>` does, with its dependencies (and only
// them: no devDependency such as @types/pg) beside it. Run `npm run build` first.
import { execFile, execFileSync, spawnSync } from "node:child_process";
import {
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { beforeAll, describe, expect, it } from "vitest";
import { startFakeOpenAIServer } from "../src/testing/fake-openai-server.js";

const run = promisify(execFile);

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const NAME = "agentloop-runtime";
const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as {
  name: string;
  bin: Record<string, string>;
  exports: Record<string, unknown>;
  dependencies: Record<string, string>;
};

let project = "";

beforeAll(() => {
  const dir = mkdtempSync(join(tmpdir(), "agentloop-package-"));
  // --ignore-scripts: `prepare` would rebuild dist/ under the other test files' feet.
  const packed = JSON.parse(
    execFileSync("npm", ["pack", "--ignore-scripts", "--json", "--pack-destination", dir], {
      cwd: ROOT,
      encoding: "utf8",
    }),
  ) as { name: string; filename: string }[];
  project = join(dir, "consumer");
  // Where `npm install <tarball>` puts it: under the name in its package.json.
  const installed = join(project, "node_modules", packed[0]?.name as string);
  mkdirSync(installed, { recursive: true });
  // The project as the README's Install makes a new one (`npm init -y` and what follows it, but
  // the folder and the registry: the package is the tarball, its dependencies this checkout's).
  const readme = readFileSync(join(ROOT, "README.md"), "utf8");
  const setup =
    /```sh\n((?:(?!```).*\n)*?.*npm init -y.*\n(?:(?!```).*\n)*?)```/.exec(readme)?.[1] ?? "npm init -y\n";
  for (const line of setup.split("\n").map((l) => l.replace(/\s#.*$/, "").trim())) {
    if (line === "" || /^mkdir |^npm install /.test(line)) continue;
    execFileSync("sh", ["-c", line], { cwd: project, stdio: "ignore" });
  }
  execFileSync("npm", ["pkg", "set", `dependencies.${NAME}=*`], { cwd: project, stdio: "ignore" });
  execFileSync("tar", [
    "-xzf",
    join(dir, packed[0]?.filename as string),
    "-C",
    installed,
    "--strip-components=1",
  ]);
  // What `npm install` would fetch: the dependencies (from this checkout), and @types/node, which a
  // TypeScript project on Node.js has anyway.
  for (const name of [...Object.keys(pkg.dependencies), "@types/node"]) {
    mkdirSync(dirname(join(project, "node_modules", name)), { recursive: true });
    symlinkSync(join(ROOT, "node_modules", name), join(project, "node_modules", name));
  }
  // Links the package's bin into node_modules/.bin, as `npm install` does.
  execFileSync("npm", ["rebuild", "--offline", "--ignore-scripts"], { cwd: project, stdio: "ignore" });
  // The programs a newcomer copies: the example (from the installed package, as the README says),
  // and the README's smallest agent.
  copyFileSync(join(installed, "examples/first-agent.ts"), join(project, "first-agent.ts"));
  const smallest = /## The smallest agent\n\n```ts\n([\s\S]*?)```/.exec(readme)?.[1];
  writeFileSync(
    join(project, "smallest.ts"),
    smallest ?? "throw new Error('no smallest agent in README.md');",
  );
}, 60_000);

const inProject = (command: string, args: string[]) =>
  spawnSync(command, args, { cwd: project, encoding: "utf8", env: { PATH: process.env.PATH ?? "" } });

describe(`the package installed in another project as ${NAME}`, () => {
  it("is named agentloop-runtime (agentloop on npm is another project) and keeps the agentloop binary", () => {
    expect(pkg.name).toBe(NAME);
    expect(Object.keys(pkg.bin)).toEqual(["agentloop"]);
  });

  it("answers `npx agentloop` and `npx agentloop-runtime` with its own CLI", () => {
    for (const command of ["agentloop", NAME]) {
      const run = inProject("npx", ["--offline", command, "--help"]);
      expect(run.stderr).toBe("");
      expect(run.stdout).toContain("Usage: agentloop [options] [command]");
      expect(run.status).toBe(0);
    }
  });

  it("imports every entry point by the package's name", () => {
    const entries = Object.keys(pkg.exports).filter((e) => e !== "./package.json");
    const code = entries
      .map(
        (e) => `if (Object.keys(await import("${NAME}${e.slice(1)}")).length === 0) throw new Error("${e}");`,
      )
      .join("\n");
    const run = inProject(process.execPath, ["--input-type=module", "-e", code]);
    expect(run.stderr).toBe("");
    expect(run.status).toBe(0);
  });

  it("type-checks a strict TypeScript program, examples/first-agent.ts and the README's smallest agent against it, its declarations included (skipLibCheck off) and without @types/pg", () => {
    writeFileSync(join(project, "index.ts"), CONSUMER);
    writeFileSync(
      join(project, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          strict: true,
          exactOptionalPropertyTypes: true,
          noUncheckedIndexedAccess: true,
          skipLibCheck: false,
          module: "nodenext",
          moduleResolution: "nodenext",
          target: "es2023",
          types: ["node"],
          noEmit: true,
        },
        files: ["index.ts", "first-agent.ts", "smallest.ts"],
      }),
    );
    const run = inProject(join(ROOT, "node_modules/.bin/tsc"), ["-p", "."]);
    expect(run.stdout + run.stderr).toBe("");
    expect(run.status).toBe(0);
  }, 60_000);

  it("runs examples/first-agent.ts copied into the project, with no key", () => {
    const run = inProject(process.execPath, ["first-agent.ts"]);
    expect(run.stderr).toBe("");
    expect(run.stdout).toContain("157.09 * 493.89 = 77585.1801 (final_answer)\n");
    expect(run.status).toBe(0);
  });

  it("runs the README's smallest agent as written, against an OpenAI-compatible server", async () => {
    const server = await startFakeOpenAIServer({
      respond: (request) => {
        const result = request.body.messages.findLast((m: { role: string }) => m.role === "tool");
        return result
          ? { text: `157.09 * 493.89 = ${result.content}` }
          : { toolCalls: [{ name: "calculator", arguments: { expression: "157.09 * 493.89" } }] };
      },
    });
    try {
      const env = { PATH: process.env.PATH ?? "", OPENAI_API_KEY: "sk-test", OPENAI_BASE_URL: server.url };
      const { stdout, stderr } = await run(process.execPath, ["smallest.ts"], { cwd: project, env });
      expect(stderr).toBe("");
      expect(stdout).toBe("157.09 * 493.89 = 77585.1801 final_answer\n");
    } finally {
      await server.close();
    }
  });

  it("the README installs, runs and imports it by that name", () => {
    // The README and the docs it links to: the commands and imports a newcomer copies.
    const readme = [
      "README.md",
      ...readdirSync(join(ROOT, "docs"), { recursive: true, encoding: "utf8" })
        .filter((f) => f.endsWith(".md"))
        .map((f) => join("docs", f)),
    ]
      .map((f) => readFileSync(join(ROOT, f), "utf8"))
      .join("\n");
    expect(readme).toContain(`npm install ${NAME}`);
    // Outside a project that installed it, `npx agentloop` would fetch and run the other project:
    // the commands to copy (comments aside) say `npx agentloop-runtime`.
    const commands = [...readme.matchAll(/```sh\n([\s\S]*?)```/g)].flatMap((m) =>
      (m[1] as string).split("\n").map((line) => line.replace(/\s#.*$/, "")),
    );
    expect(commands.filter((line) => /npx agentloop(?![\w-])/.test(line))).toEqual([]);
    const imported = [...readme.matchAll(/from "(agentloop[^"]*)"/g)].map((m) => m[1] as string);
    expect(imported.length).toBeGreaterThan(0);
    for (const specifier of imported) {
      expect(specifier.startsWith(NAME)).toBe(true);
      expect(pkg.exports).toHaveProperty([`.${specifier.slice(NAME.length)}`]);
    }
  });
});

/**
 * A program of another project: every entry point; `needsApproval` typed by the schema (and an
 * error where it is wrong, not at `parameters`); `pendingApprovals` narrowed by the stop reason,
 * on the result and on `turn_complete`; the built-in tools.
 */
const CONSUMER = `
import { Agent, calculator, convertTemperature, defineTool, getCurrentTime } from "agentloop-runtime";
import { anthropicModel } from "agentloop-runtime/anthropic";
import { connectMcpServers } from "agentloop-runtime/mcp";
import { openAIChatModel } from "agentloop-runtime/openai";
import { createApp } from "agentloop-runtime/server";
import { postgresStore, sqliteStore } from "agentloop-runtime/store";
import { scriptedModel } from "agentloop-runtime/testing";
import { z } from "zod";

const deleteFile = defineTool({
  name: "delete_file",
  description: "Deletes a file.",
  parameters: z.object({ path: z.string() }),
  needsApproval: ({ path }) => !path.startsWith("/tmp/"),
  execute: ({ path }) => \`deleted \${path}\`,
});
defineTool({
  name: "t",
  description: "d",
  parameters: z.object({ path: z.string() }),
  // @ts-expect-error the arguments have no \`nope\`
  needsApproval: ({ nope }) => nope,
  execute: () => "",
});
const tools = [deleteFile, calculator, getCurrentTime, convertTemperature];
const agent = new Agent({ model: scriptedModel([{ text: "hi" }]), tools });
const result = await agent.run("Clean up");
if (result.stopReason === "approval_required") {
  const ids: string[] = result.pendingApprovals.map((call) => call.id);
  console.log(ids);
}
for await (const event of agent.stream("Clean up")) {
  if (event.type === "turn_complete" && event.stopReason === "approval_required") {
    console.log(event.pendingApprovals.length);
  }
}
const store = await postgresStore("postgres://localhost/db", { leaseMs: 10_000, maxConnections: 2 });
console.log(store, sqliteStore, createApp, connectMcpServers, openAIChatModel, anthropicModel);
`;
