// The sub-agent tools of the MCP server: one tool per sub-agent, through the official client over
// the SDK's in-memory linked pair, the agents scripted.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { type CallToolResult, ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { describe, expect, it } from "vitest";
import { Agent } from "../agent/agent.js";
import { AgentloopError } from "../core/errors.js";
import { scriptedModel } from "../testing/scripted-model.js";
import { calculator } from "../tools/builtin/calculator.js";
import { agentMcpServer, type RunSubAgent, registerSubAgentTools, type SubAgentInfo } from "./mcp-agent.js";

const noSessions = {
  hold: () => Promise.reject(new AgentloopError("config", "no store here")),
};

async function connected(agents: readonly SubAgentInfo[], run: RunSubAgent, elicit?: string[]) {
  const main = new Agent({ model: scriptedModel([]) });
  const server = agentMcpServer({
    agent: main,
    sessions: noSessions,
    version: "0.0.0",
    log: () => {},
    subAgents: { agents, run },
  });
  const client = new Client(
    { name: "test", version: "1" },
    elicit ? { capabilities: { elicitation: { form: {} } } } : {},
  );
  if (elicit)
    client.setRequestHandler(ElicitRequestSchema, (request) => {
      elicit.push(request.params.message);
      return { action: "accept", content: { approve: true } };
    });
  const [a, b] = InMemoryTransport.createLinkedPair();
  await Promise.all([server.connect(a), client.connect(b)]);
  return client;
}

const text = (result: unknown) => ((result as CallToolResult).content[0] as { text: string }).text;

describe("registerSubAgentTools", () => {
  it("offers each sub-agent as a tool of its name taking task, and runs the task on it", async () => {
    const researcher = new Agent({
      model: scriptedModel(
        (request) => ({ text: `researched: ${String(request.messages.at(-1)?.content)}` }),
        {
          id: "r",
        },
      ),
    });
    const writer = new Agent({ model: scriptedModel(() => ({ text: "written" }), { id: "w" }) });
    const byName: Record<string, Agent> = { researcher, writer };
    const ran: string[] = [];
    const client = await connected(
      [
        { name: "researcher", description: "Finds things out." },
        { name: "writer", description: "Writes things." },
      ],
      (name, task, { signal }) => {
        ran.push(`${name}: ${task}`);
        return (byName[name] as Agent).stream(task, { signal });
      },
    );
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name)).toEqual(["run_agent", "researcher", "writer"]);
    expect(tools[1]).toMatchObject({
      description: "Finds things out.",
      inputSchema: { required: ["task"] },
    });
    const result = await client.callTool({ name: "researcher", arguments: { task: "the moon" } });
    expect(text(result)).toBe("researched: the moon");
    expect(ran).toEqual(["researcher: the moon"]);
    expect(text(await client.callTool({ name: "writer", arguments: { task: "a poem" } }))).toBe("written");
  });

  it("gives the run an approver when the client can be asked, and reports a failed stop as an error", async () => {
    let approver = false;
    const asked: string[] = [];
    const client = await connected(
      [{ name: "calc", description: "Computes." }],
      (_name, task, { signal, onApproval }) => {
        approver = onApproval !== undefined;
        const agent = new Agent({
          model: scriptedModel(() => ({
            toolCalls: [{ name: "calculator", arguments: { expression: task } }],
          })),
          tools: [{ ...calculator, needsApproval: true }],
          maxIterations: 1,
          ...(onApproval && { onApproval }),
        });
        return agent.stream(task, { signal });
      },
      asked,
    );
    const result = await client.callTool({ name: "calc", arguments: { task: "1+1" } });
    expect(approver).toBe(true);
    expect(asked).toEqual([
      `The agent wants to call the tool 'calculator' with the arguments {"expression":"1+1"}. Approve this call?`,
    ]);
    expect(result.isError).toBe(true);
    expect(text(result)).toContain("max_iterations");
  });

  it("refuses a name that is not a tool name or is taken", () => {
    const server = agentMcpServer({
      agent: new Agent({ model: scriptedModel([]) }),
      sessions: noSessions,
      version: "0",
      log: () => {},
    });
    const run: RunSubAgent = () => {
      throw new Error("not run");
    };
    expect(() =>
      registerSubAgentTools(server, [{ name: "run_agent", description: "x" }], run, () => {}),
    ).toThrow(/run_agent.*taken/);
    expect(() =>
      registerSubAgentTools(server, [{ name: "bad name", description: "x" }], run, () => {}),
    ).toThrow(/bad name/);
  });
});
