import { type Message as A2AMessage, type Artifact, type Part, Role } from "@a2a-js/sdk";

/**
 * The parts of A2A messages agentloop reads and writes: the text of a client's message, the
 * decisions it takes on a run waiting for approvals, and the agent's messages and answer artifact.
 */

/** The id of the artifact that carries a task's answer (replaced each iteration, final at the end). */
const ANSWER_ARTIFACT = "answer";

export const textPart = (text: string): Part => ({
  content: { $case: "text", value: text },
  mediaType: "text/plain",
  filename: "",
  metadata: {},
});

export const dataPart = (value: unknown): Part => ({
  content: { $case: "data", value },
  mediaType: "application/json",
  filename: "",
  metadata: {},
});

/** A message of the agent's on a task. */
export function agentMessage(
  taskId: string,
  contextId: string,
  parts: Part[],
  messageId?: string,
): A2AMessage {
  return {
    messageId: messageId ?? crypto.randomUUID(),
    contextId,
    taskId,
    role: Role.ROLE_AGENT,
    parts,
    metadata: {},
    extensions: [],
    referenceTaskIds: [],
  };
}

export function answerArtifact(text: string): Artifact {
  return {
    artifactId: ANSWER_ARTIFACT,
    name: "answer",
    description: "The agent's answer.",
    parts: [textPart(text)],
    metadata: {},
    extensions: [],
  };
}

/** The text of a message: its text parts, and its data parts as JSON, a line apart. */
export function textOf(message: A2AMessage, withData = true): string {
  const texts: string[] = [];
  for (const part of message.parts) {
    const content = part.content;
    if (content?.$case === "text") texts.push(content.value);
    else if (withData && content?.$case === "data") texts.push(JSON.stringify(content.value));
  }
  return texts.join("\n");
}

const APPROVE = new Set(["approve", "approved", "yes", "y", "ok"]);
const DENY = new Set(["deny", "denied", "no", "n"]);
const HOW =
  'Reply "approve" or "deny" (every waiting call), or send a data part {"approve": [call ids] | "all", "deny": [call ids] | "all"}.';

type Ids = readonly string[] | "all";
const isIds = (value: unknown): value is Ids =>
  value === "all" || (Array.isArray(value) && value.every((id) => typeof id === "string"));

/** The decisions a message takes on a run waiting for approvals, or why it takes none. */
export function decisionOf(message: A2AMessage): { approve?: Ids; deny?: Ids } | string {
  for (const part of message.parts) {
    const value: unknown = part.content?.$case === "data" ? part.content.value : undefined;
    if (typeof value !== "object" || value === null || !("approve" in value || "deny" in value)) continue;
    const { approve, deny } = value as { approve?: unknown; deny?: unknown };
    if ((approve !== undefined && !isIds(approve)) || (deny !== undefined && !isIds(deny)))
      return `"approve" and "deny" take a list of call ids or "all". ${HOW}`;
    if (approve === "all" && deny === "all") return `"approve" and "deny" cannot both be "all". ${HOW}`;
    return { ...(approve !== undefined && { approve }), ...(deny !== undefined && { deny }) };
  }
  const word = textOf(message, false)
    .trim()
    .toLowerCase()
    .replace(/[.!]+$/, "");
  if (APPROVE.has(word)) return { approve: "all" };
  if (DENY.has(word)) return { deny: "all" };
  return `Not understood as a decision. ${HOW}`;
}
