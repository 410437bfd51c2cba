import { readFileSync } from "node:fs";
import { AgentCard, type AgentCard as Card, TaskState } from "@a2a-js/sdk";
import {
  DefaultRequestHandler,
  JsonRpcTransportHandler,
  ServerCallContext,
  type User,
  validateVersion,
} from "@a2a-js/sdk/server";
import { errorMessage } from "../core/errors.js";
import { echoed } from "../core/redact.js";
import { memoryStore } from "../store/memory-store.js";
import { SESSION_ID_PATTERN } from "../store/types.js";
import { RunExecutor } from "./a2a-executor.js";
import { RunTaskStore } from "./a2a-tasks.js";
import type { EndpointDeps } from "./run-request.js";

/**
 * The A2A side of the server, wired from the official SDK's server pieces (loaded on the first
 * A2A request, so a server nobody asks over A2A never loads the SDK): its `DefaultRequestHandler`
 * with our task store and executor, and its JSON-RPC transport, which speaks the A2A 1.0 method
 * names (`SendMessage`, `SendStreamingMessage`, `GetTask`, `CancelTask`, ...).
 */

/** One JSON-RPC response. */
export interface RpcReply {
  jsonrpc: string;
  id: string | number | null;
  result?: unknown;
  error?: unknown;
}

/** What a request brings besides its body. */
interface RpcCall {
  /** The client of a per-client key. */
  owner: string | undefined;
  /** The `A2A-Version` header (absent means 0.3, which is not served). */
  version: string | undefined;
}

export interface A2aEngine {
  /** The agent card (A2A 1.0 JSON), its JSON-RPC interface at `url`. */
  card(url: string): unknown;
  /** Answers one JSON-RPC request: a response, or the responses of a stream. */
  call(body: unknown, call: RpcCall): Promise<RpcReply | AsyncGenerator<RpcReply, void, undefined>>;
  /** The JSON-RPC error of an error a stream threw (secrets redacted). */
  error(error: unknown): { code: number; message: string };
}

/** JSON-RPC error codes of A2A 1.0 that our own checks answer with. */
const INVALID_PARAMS = -32602;
const TASK_NOT_CANCELABLE = -32002;
const UNSUPPORTED_OPERATION = -32004;
const INTERNAL_ERROR = -32603;

/** The package's version, the card's `version`; dist/server and dist/cli-bundle are both two levels down. */
function packageVersion(): string {
  try {
    const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as {
      version?: string;
    };
    return pkg.version ?? "0.0.0";
  } catch {
    return "0.0.0";
  }
}

/** The card of the default agent: public; it declares the Bearer scheme when the server needs a key. */
function agentCard(deps: EndpointDeps, secured: boolean): Card {
  const name = deps.defaultModel;
  const agent = deps.agents[name];
  const instructions = agent?.options.instructions?.trim().split("\n")[0] ?? "";
  const description =
    instructions ||
    `An agentloop agent (model ${agent?.options.model.id ?? name}) that uses its tools in a loop.`;
  const modes = ["text/plain", "application/json"];
  return {
    name,
    description,
    supportedInterfaces: [{ url: "", protocolBinding: "JSONRPC", tenant: "", protocolVersion: "1.0" }],
    provider: undefined,
    version: packageVersion(),
    capabilities: { streaming: true, pushNotifications: false, extensions: [], extendedAgentCard: false },
    securitySchemes: secured
      ? {
          bearer: {
            scheme: {
              $case: "httpAuthSecurityScheme",
              value: {
                description: "The server's API key (AGENTLOOP_API_KEY) or a client key.",
                scheme: "Bearer",
                bearerFormat: "",
              },
            },
          },
        }
      : {},
    securityRequirements: secured ? [{ schemes: { bearer: { list: [] } } }] : [],
    defaultInputModes: modes,
    defaultOutputModes: modes,
    skills: [
      {
        id: "run",
        name,
        description,
        tags: ["agent", ...(agent?.tools.map((tool) => tool.name) ?? [])],
        examples: [],
        inputModes: modes,
        outputModes: modes,
        securityRequirements: [],
      },
    ],
    signatures: [],
  };
}

/** The client a per-client key names, as the SDK's `User` (it scopes the SDK's event buses too). */
class Owner implements User {
  constructor(readonly userName: string) {}
  get isAuthenticated(): boolean {
    return true;
  }
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value);

export function a2aEngine(deps: EndpointDeps, secured: boolean): A2aEngine {
  const store = deps.store ?? memoryStore();
  const executor = new RunExecutor({ ...deps, store });
  const tasks = new RunTaskStore(store, executor.running);
  const card = agentCard(deps, secured);
  const handler = new DefaultRequestHandler(
    card,
    tasks,
    executor,
    undefined,
    undefined,
    undefined,
    undefined,
    undefined,
    // A task waiting for input has no run in progress: its bus closes, and the next message opens one.
    { keepBusAliveStates: [] },
  );
  const transport = new JsonRpcTransportHandler(handler);

  /** Our checks before the SDK's, in the protocol's error shape: what the SDK would take but we cannot do. */
  async function refusal(method: unknown, params: unknown, context: ServerCallContext) {
    if (method === "ListTasks")
      return {
        code: UNSUPPORTED_OPERATION,
        message:
          "ListTasks is not supported by this agent: GetTask reads a task by the id SendMessage returned.",
      };
    if (!isObject(params)) return undefined;
    if ((method === "SendMessage" || method === "SendStreamingMessage") && isObject(params.message)) {
      const { parts, taskId, contextId } = params.message;
      const file = Array.isArray(parts)
        ? parts.findIndex((p) => isObject(p) && ("raw" in p || "url" in p))
        : -1;
      if (file >= 0)
        return {
          code: INVALID_PARAMS,
          message: `message.parts[${file}] is a file: this agent reads text and data parts only.`,
        };
      if (typeof taskId === "string" && taskId !== "") {
        const task = await tasks.load(taskId, context);
        const state = task?.status?.state;
        if (state === TaskState.TASK_STATE_WORKING || state === TaskState.TASK_STATE_SUBMITTED)
          return {
            code: UNSUPPORTED_OPERATION,
            message: `Task ${taskId} is working: send the next message once it asks for input (input-required), or cancel it.`,
          };
      } else if (typeof contextId === "string" && contextId !== "" && !SESSION_ID_PATTERN.test(contextId)) {
        return {
          code: INVALID_PARAMS,
          message:
            "message.contextId: use 1 to 128 characters of A-Z a-z 0-9 . _ - (a UUID), or none for a new context.",
        };
      }
    }
    if (method === "CancelTask" && typeof params.id === "string" && params.id !== "") {
      const state = (await tasks.load(params.id, context))?.status?.state;
      if (state === TaskState.TASK_STATE_INPUT_REQUIRED || state === TaskState.TASK_STATE_WORKING) {
        const problem = await executor.closeStoredRun(params.id, context);
        if (problem) return { code: TASK_NOT_CANCELABLE, message: problem };
      } else if (state !== undefined && state !== TaskState.TASK_STATE_CANCELED) {
        const ended = TaskState[state].replace("TASK_STATE_", "").toLowerCase();
        return {
          code: TASK_NOT_CANCELABLE,
          message: `Task ${params.id} has ended (${ended}): there is nothing to cancel.`,
        };
      }
    }
    return undefined;
  }

  return {
    error: (error) => {
      const { code, message } = JsonRpcTransportHandler.mapToJSONRPCError(error);
      return { code, message: deps.redact(message) };
    },
    card: (url) =>
      AgentCard.toJSON({
        ...card,
        supportedInterfaces: card.supportedInterfaces.map((i) => ({ ...i, url })),
      }),

    async call(body, { owner, version }) {
      const id =
        isObject(body) && (typeof body.id === "string" || typeof body.id === "number") ? body.id : null;
      const context = new ServerCallContext({
        ...(owner !== undefined && { user: new Owner(owner) }),
        ...(version !== undefined && { requestedVersion: version }),
      });
      try {
        validateVersion(context.requestedVersion, card, "JSONRPC");
      } catch (error) {
        const { code } = JsonRpcTransportHandler.mapToJSONRPCError(error);
        const message = `A2A-Version ${version === undefined ? "absent (0.3)" : echoed(version)} is not served: send the header A2A-Version: 1.0.`;
        return { jsonrpc: "2.0", id, error: { code, message } };
      }
      try {
        if (isObject(body) && body.jsonrpc === "2.0") {
          const refused = await refusal(body.method, body.params, context);
          if (refused) return { jsonrpc: "2.0", id, error: refused };
        }
        const reply = await transport.handle(isObject(body) ? body : { invalid: body }, context);
        if (
          !(Symbol.asyncIterator in reply) &&
          isObject(reply.error) &&
          typeof reply.error.message === "string"
        )
          reply.error.message = deps.redact(reply.error.message);
        return reply;
      } catch (error) {
        return {
          jsonrpc: "2.0",
          id,
          error: { code: INTERNAL_ERROR, message: deps.redact(errorMessage(error)) },
        };
      }
    },
  };
}
