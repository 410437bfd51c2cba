// Sub-agents behind the server (SPEC sections 6, 9 and 10): a child's events travel in the
// `agentloop` extension field (its text too, never as the answer's content); a child's call that
// needs approval stops the top-level run with that call in pendingApprovals, and
// POST /v1/runs/{runId}/approvals with the top-level runId continues the child, then its parent.
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { Agent, defineTool } from "../src/index.js";
import { memoryStore } from "../src/store/index.js";
import { scriptedModel } from "../src/testing/index.js";
import { type Chunk, contentOf, post, sse } from "./support/http.js";
import { listen } from "./support/listen.js";

function team() {
  const ran: string[] = [];
  const write = defineTool({
    name: "write_note",
    description: "Writes the note.",
    parameters: z.object({ text: z.string() }),
    needsApproval: true,
    execute: ({ text }) => {
      ran.push(text);
      return "saved";
    },
  });
  const writer = new Agent({
    model: scriptedModel([
      { text: "Saving.", toolCalls: [{ id: "w1", name: "write_note", arguments: { text: "hi" } }] },
      { text: "Saved the note." },
    ]),
    tools: [write],
    description: "Writes notes.",
  });
  const model = scriptedModel([
    {
      toolCalls: [{ id: "d1", name: "delegate_task", arguments: { agent: "writer", task: "Save hi" } }],
    },
    { text: "The writer saved it." },
  ]);
  return { agent: new Agent({ model, agents: { writer } }), ran };
}

describe("sub-agents behind the server", () => {
  it("streams a child's events in the extension field; /approvals on the top-level run continues the child, then its parent", async () => {
    const store = memoryStore();
    const { agent, ran } = team();
    const { client, baseURL } = await listen({ agents: { notes: agent }, store });
    const chunks: Chunk[] = [];
    const stream = await client.chat.completions.create({
      model: "notes",
      messages: [{ role: "user", content: "Save hi" }],
      stream: true,
    });
    for await (const chunk of stream) chunks.push(chunk);
    const runId = chunks[0]?.id as string;
    // The child's "Saving." is not the answer: it is in its events only.
    expect(contentOf(chunks)).not.toContain("Saving.");
    expect(contentOf(chunks)).toContain('Waiting for approval: write_note({"text":"hi"}) [w1]');
    const events = chunks.flatMap((c) => (c.agentloop ? [c.agentloop] : []));
    const child = events.filter((e) => e.parentRunId === runId);
    expect(child.map((e) => e.type)).toEqual(
      expect.arrayContaining([
        "iteration_start",
        "message_delta",
        "tool_call",
        "approval_request",
        "turn_complete",
      ]),
    );
    for (const e of child) expect(e).toMatchObject({ parentCallId: "d1", agent: "writer", depth: 1 });
    const childRunId = child[0]?.runId;
    expect(events.at(-1)).toMatchObject({
      type: "turn_complete",
      runId,
      stopReason: "approval_required",
      pendingApprovals: [
        { id: "w1", name: "write_note", arguments: { text: "hi" }, agent: "writer", runId: childRunId },
      ],
    });
    expect(ran).toEqual([]);

    const res = await post(`${baseURL}/runs/${runId}/approvals`, { approve: ["w1"], stream: true });
    expect(res.status).toBe(200);
    const continuation = await sse(res);
    expect(contentOf(continuation.chunks)).toBe("The writer saved it.");
    const more = continuation.chunks.flatMap((c) => (c.agentloop ? [c.agentloop] : []));
    expect(more.filter((e) => e.type === "turn_complete").map((e) => [e.runId, e.stopReason])).toEqual([
      [childRunId, "final_answer"],
      [runId, "final_answer"],
    ]);
    expect(more.find((e) => e.type === "tool_result" && e.id === "d1")).toMatchObject({
      content: "Saved the note.",
      isError: false,
    });
    expect(ran).toEqual(["hi"]);
    await store.close();
  });
});
