#!/usr/bin/env node
// A small MCP server over stdio: a users directory kept in a JSON file.
// Usage: node examples/users-server/server.mjs [users.json]
// The file is the first argument, else $USERS_FILE, else users.json beside this script.
import { readFile, rename, writeFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { z } from "zod";

const file =
  process.argv[2] ?? process.env.USERS_FILE ?? fileURLToPath(new URL("./users.json", import.meta.url));

/** @typedef {{ id: string, name: string, email: string, company: string, title?: string }} User */

/** @returns {Promise<User[]>} */
async function load() {
  return JSON.parse(await readFile(file, "utf8"));
}

/** Writes through a temporary file, so a crash never leaves half a file. */
async function save(/** @type {User[]} */ users) {
  const temporary = `${file}.${process.pid}.tmp`;
  await writeFile(temporary, `${JSON.stringify(users, null, 2)}\n`);
  await rename(temporary, file);
}

const json = (value) => ({ content: [{ type: "text", text: JSON.stringify(value, null, 2) }] });
const failure = (text) => ({ content: [{ type: "text", text }], isError: true });

const server = new McpServer({ name: "users-directory", version: "1.0.0" });

server.registerTool(
  "search_users",
  {
    description:
      "Searches the users directory by name, email or company (case-insensitive, partial match). Returns id, name and email of each match.",
    inputSchema: { query: z.string().min(1).describe("Text to look for, e.g. 'bob' or 'acme'") },
    annotations: { readOnlyHint: true },
  },
  async ({ query }) => {
    const needle = query.toLowerCase();
    const matches = (await load()).filter((user) =>
      [user.name, user.email, user.company].some((field) => field.toLowerCase().includes(needle)),
    );
    return json(matches.map(({ id, name, email }) => ({ id, name, email })));
  },
);

server.registerTool(
  "get_user_by_id",
  {
    description: "Returns the full record of one user.",
    inputSchema: { id: z.string().describe("The user's id, as returned by search_users") },
    annotations: { readOnlyHint: true },
  },
  async ({ id }) => {
    const user = (await load()).find((candidate) => candidate.id === id);
    return user ? json(user) : failure(`No user with id '${id}'. Use search_users to find the id.`);
  },
);

server.registerTool(
  "update_user",
  {
    description: "Changes fields of one user's record and returns the updated record.",
    inputSchema: {
      id: z.string().describe("The user's id"),
      name: z.string().min(1).optional(),
      email: z.email().optional(),
      company: z.string().min(1).optional(),
      title: z.string().min(1).optional(),
    },
    annotations: { readOnlyHint: false, idempotentHint: true },
  },
  async ({ id, ...fields }) => {
    const users = await load();
    const user = users.find((candidate) => candidate.id === id);
    if (!user) return failure(`No user with id '${id}'. Use search_users to find the id.`);
    const changes = Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== undefined));
    if (Object.keys(changes).length === 0) return failure("Nothing to update: give at least one field.");
    Object.assign(user, changes);
    await save(users);
    return json(user);
  },
);

await server.connect(new StdioServerTransport());
console.error(`users-directory MCP server ready (${file})`);
