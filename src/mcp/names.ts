const MAX_NAME = 64;

/** Makes a name valid for providers (`^[a-zA-Z0-9_-]{1,64}$`): other characters become `_`. */
export function toolNameFor(name: string): string {
  const cleaned = name.replace(/[^a-zA-Z0-9_-]/g, "_").slice(0, MAX_NAME);
  return cleaned === "" ? "tool" : cleaned;
}

export interface NamedTool {
  server: string;
  /** The name the server gave. */
  tool: string;
}

export interface AssignedName {
  name: string;
  /** Set when the tool was renamed because its name was taken. */
  warning?: string;
}

/**
 * Gives every tool a unique provider-valid name, in order: the first source keeps a name and a
 * later one is renamed `<server>__<tool>` (with `_2`, `_3`... if even that is taken). Reserved
 * names (built-in and local tools) always win. Pure: same input, same names.
 */
export function assignToolNames(tools: readonly NamedTool[], reserved: readonly string[]): AssignedName[] {
  const owners = new Map<string, string>(reserved.map((name) => [name, "a built-in or local tool"]));
  return tools.map(({ server, tool }) => {
    const wanted = toolNameFor(tool);
    const owner = owners.get(wanted);
    if (owner === undefined) {
      owners.set(wanted, `MCP server '${server}'`);
      return { name: wanted };
    }
    const prefixed = toolNameFor(`${server}__${tool}`);
    let name = prefixed;
    for (let n = 2; owners.has(name); n++) {
      const suffix = `_${n}`;
      name = prefixed.slice(0, MAX_NAME - suffix.length) + suffix;
    }
    owners.set(name, `MCP server '${server}'`);
    return {
      name,
      warning: `MCP tool '${tool}' of server '${server}' is renamed '${name}': '${wanted}' is already taken by ${owner}.`,
    };
  });
}
