export type { AgentOptions, AnyAgent, CompactResult, ResumeOptions, RunOptions } from "./agent/agent.js";
export { Agent, DEFAULTS } from "./agent/agent.js";
export type { ClientToolResult } from "./agent/client-tools.js";
export { RunHandle } from "./agent/handle.js";
export type { OutputOf, OutputSchema } from "./agent/output.js";
export type { Budget, Mode, ToolProtocol } from "./agent/prompt.js";
export type { ApprovalDecision } from "./agent/run.js";
export { Session } from "./agent/session.js";
export type { AgentloopErrorCode } from "./core/errors.js";
export { AgentloopError } from "./core/errors.js";
export type {
  AgentEvent,
  AgentEventBody,
  AgentEventType,
  IterationRecord,
  PendingApproval,
  RunResult,
  RunResultFields,
  StopOutcome,
  StopReason,
} from "./core/events.js";
export type {
  AssistantMessage,
  ImageInput,
  MediaPart,
  Message,
  TextInput,
  ToolCall,
  ToolMessage,
  Usage,
  UserInput,
  UserMessage,
} from "./core/messages.js";
export type {
  ChildRun,
  ClientTool,
  GuardState,
  PendingCalls,
  RunState,
  RunStatus,
} from "./core/run-state.js";
export { RUN_STATE_VERSION } from "./core/run-state.js";
export type { CompactionOptions } from "./memory/compaction.js";
export type { ContextManager, ContextOptions, ContextTransform } from "./memory/prune.js";
export { contextManager } from "./memory/prune.js";
export type { TokenCounter } from "./memory/tokens.js";
export { contextWindowFor, tokenCounterFor, truncateToTokens } from "./memory/tokens.js";
export type {
  Model,
  ModelError,
  ModelEvent,
  ModelReply,
  ModelRequest,
  ToolChoice,
  ToolSpec,
} from "./models/adapter.js";
export type { ModelPrice, PriceTable } from "./models/pricing.js";
export { DEFAULT_PRICES } from "./models/pricing.js";
export type { Recorder } from "./record/recorder.js";
export { recorder } from "./record/recorder.js";
export { calculator, convertTemperature, getCurrentTime } from "./tools/builtin/index.js";
export type {
  JsonSchema,
  JsonSchemaToolDefinition,
  Tool,
  ToolAnnotations,
  ToolContext,
  ToolOutput,
  ZodToolDefinition,
} from "./tools/tool.js";
export { defineTool, toolOutput } from "./tools/tool.js";
