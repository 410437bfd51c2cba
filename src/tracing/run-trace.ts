/**
 * A run's OpenTelemetry spans, following the GenAI semantic conventions (SPEC section 11): one
 * `invoke_agent {agent}` span per run, and under it one `chat {model}` span per model call and one
 * `execute_tool {tool}` span per tool call. The attribute names are written here, as the
 * conventions define them (their constants live only in the conventions package's unstable entry).
 *
 * Hooked at four seams: the run's start (`traceRun`, from `Agent`) and end (`ended`/`failed`, from
 * the run's handle), the model call (`modelCall`/`modelReturned`, from the stages that send the
 * request and take the reply; `attempt`/`failed` from the adapter, for each HTTP request, so a
 * retry is a `chat` span of its own) and the tool call (`call`, from tools/execute.ts, which runs the
 * tool's `execute` in its span's context). With no SDK registered and no `tracerProvider`, a run
 * has no `RunTrace` at all: nothing is made, per run, per iteration or per chunk.
 */
import {
  type Attributes,
  type Context,
  context,
  ProxyTracerProvider,
  type Span,
  type SpanContext,
  SpanKind,
  SpanStatusCode,
  type Tracer,
  type TracerProvider,
  trace,
} from "@opentelemetry/api";
import type { RunState, StoppedState } from "../core/run-state.js";
import type { Model, ModelError, ModelReply, ModelRequest } from "../models/adapter.js";
import type { AttemptObserver } from "../models/attempts.js";
import type { CallOutcome, CallSpan, CallTracer, PreparedCall } from "../tools/execute.js";
import type { Tool, ToolContext } from "../tools/tool.js";
import { inputMessages, outputMessages, systemInstructions } from "./content.js";

/** The instrumentation scope of every span. */
const SCOPE = "agentloop";
/** `gen_ai.agent.name` of an agent without a name. */
const DEFAULT_AGENT_NAME = "agentloop";
/** The provider the API gives before (or without) an SDK: a no-op. */
const NOOP_PROVIDER = new ProxyTracerProvider().getDelegate();

type Redact = (text: string) => string;

/** What an agent's runs are traced with: made once per agent (its attributes once something records). */
export interface AgentTracing {
  /** Undefined: the global provider, as registered when each run starts. */
  provider: TracerProvider | undefined;
  /** Record message content (`gen_ai.input.messages`...). */
  content: boolean;
  name: string;
  model: Model;
  /** The attributes its spans start with, made by the first run that is traced. */
  shared: SharedAttributes | undefined;
}

/** What every span of an agent's runs starts with: the attributes a sampler may decide on. */
interface SharedAttributes {
  /** `invoke_agent`: operation, agent name, provider, model. */
  agent: Attributes;
  /** `chat`: operation, provider, model, server address and port. */
  chat: Attributes;
}

const TOOL_START: Attributes = Object.freeze({ "gen_ai.operation.name": "execute_tool" });

/**
 * Whether `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT` asks for content on spans: `true`,
 * `SPAN_ONLY` or `SPAN_AND_EVENT` (any case). Anything else (unset, `false`, `NO_CONTENT`,
 * `EVENT_ONLY`) keeps it off.
 */
function contentFromEnvironment(env: NodeJS.ProcessEnv = process.env): boolean {
  const value = env.OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT?.trim().toLowerCase();
  return value === "true" || value === "span_only" || value === "span_and_event";
}

/** An agent's tracing from its options and model. */
export function agentTracing(
  model: Model,
  options: {
    name?: string | undefined;
    tracerProvider?: TracerProvider | undefined;
    captureMessageContent?: boolean | undefined;
  },
): AgentTracing {
  return {
    provider: options.tracerProvider,
    content: options.captureMessageContent ?? contentFromEnvironment(),
    name: options.name ?? DEFAULT_AGENT_NAME,
    model,
    shared: undefined,
  };
}

function sharedAttributes(t: AgentTracing): SharedAttributes {
  const { id, provider, baseURL } = t.model;
  const agent: Attributes = { "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": t.name };
  const chat: Attributes = { "gen_ai.operation.name": "chat" };
  if (provider) agent["gen_ai.provider.name"] = chat["gen_ai.provider.name"] = provider;
  agent["gen_ai.request.model"] = chat["gen_ai.request.model"] = id;
  const server = serverOf(baseURL);
  if (server) {
    chat["server.address"] = server.address;
    chat["server.port"] = server.port;
  }
  return { agent: Object.freeze(agent), chat: Object.freeze(chat) };
}

/**
 * Starts a run's `invoke_agent` span, or returns undefined when nothing would record it (no SDK,
 * or not sampled): then nothing else is made for the run. Its parent: the trace context the state
 * keeps (a resumed run continues its trace, in any process), else the active context (a
 * sub-agent's run, started inside its parent's `execute_tool delegate_task`, nests there). A state
 * without one keeps this span's from now on.
 */
export function traceRun(t: AgentTracing, state: RunState, redact: Redact | undefined): RunTrace | undefined {
  const provider = t.provider ?? trace.getTracerProvider();
  if (provider instanceof ProxyTracerProvider && provider.getDelegate() === NOOP_PROVIDER) return undefined;
  const tracer = provider.getTracer(SCOPE);
  const stored = state.traceparent === undefined ? undefined : parseTraceparent(state.traceparent);
  const parent = stored ? trace.setSpanContext(context.active(), stored) : context.active();
  t.shared ??= sharedAttributes(t);
  const span = tracer.startSpan(
    `invoke_agent ${t.name}`,
    { kind: SpanKind.INTERNAL, attributes: t.shared.agent },
    parent,
  );
  if (!span.isRecording()) {
    span.end();
    return undefined;
  }
  span.setAttribute("agentloop.run.id", state.runId);
  if (state.sessionId !== undefined) span.setAttribute("gen_ai.conversation.id", state.sessionId);
  state.traceparent ??= traceparentOf(span.spanContext());
  return new RunTrace(tracer, span, trace.setSpan(parent, span), t, t.shared.chat, redact ?? same);
}

const same: Redact = (text) => text;

/** One run's spans. Its methods never throw into the run. */
export class RunTrace implements CallTracer, AttemptObserver {
  readonly traceId: string;
  /** The span of the model call's request in flight. */
  private chat: Span | undefined = undefined;
  /** The model call in flight, and the HTTP requests it sent so far. */
  private request: ModelRequest | undefined = undefined;
  private attempts = 0;

  /** Set when content is recorded: what takes the secrets out of it. */
  private readonly content: Redact | undefined;

  constructor(
    private readonly tracer: Tracer,
    private readonly span: Span,
    /** The context of the run's span: the parent of its model and tool calls. */
    private readonly context: Context,
    private readonly t: AgentTracing,
    private readonly chatAttributes: Attributes,
    /** Takes the configured secrets out of what is recorded (content, error messages). */
    private readonly redact: Redact,
  ) {
    this.traceId = span.spanContext().traceId;
    this.content = t.content ? redact : undefined;
  }

  /** A model call starts: its `chat` span, with the request's content when recorded. */
  modelCall(request: ModelRequest): void {
    this.chat?.end();
    this.request = request;
    this.attempts = 0;
    this.chat = this.chatSpan(request);
  }

  /**
   * An HTTP request of the model call is sent: the first has the span `modelCall` started, each
   * retry a span of its own (the one before ended when its request failed).
   */
  attempt(): void {
    if (this.attempts++ === 0 || !this.request) return;
    this.chat?.end();
    this.chat = this.chatSpan(this.request);
  }

  /** That request failed (an HTTP error status, no answer, a stream broken off): its span ends ERROR. */
  attemptFailed(type: string, message: string): void {
    const span = this.chat;
    if (!span) return;
    this.chat = undefined;
    failSpan(span, type, this.redact(message));
    span.end();
  }

  private chatSpan(request: ModelRequest): Span {
    const span = this.tracer.startSpan(
      `chat ${this.t.model.id}`,
      { kind: SpanKind.CLIENT, attributes: this.chatAttributes },
      this.context,
    );
    const redact = this.content;
    if (redact && span.isRecording()) {
      span.setAttribute("gen_ai.input.messages", inputMessages(request.messages, redact));
      if (request.system)
        span.setAttribute("gen_ai.system_instructions", systemInstructions(request.system, redact));
    }
    return span;
  }

  /** The model call ended with a reply, an error, or nothing (the stream broke off, the run was aborted). */
  modelReturned(ended: ModelReply | ModelError | undefined): void {
    const span = this.chat;
    this.request = undefined;
    if (!span) return; // its last request failed, and its span says so
    this.chat = undefined;
    if (ended && span.isRecording()) this.replied(span, ended);
    span.end();
  }

  /** A model call's outcome on its span: the response and its usage, or the error. */
  private replied(span: Span, ended: ModelReply | ModelError): void {
    if (!("toolCalls" in ended)) {
      const type = ended.status === undefined ? ended.code : String(ended.status);
      failSpan(span, type, this.redact(ended.message));
      return;
    }
    const { usage } = ended;
    span.setAttribute("gen_ai.response.finish_reasons", [ended.finishReason]);
    if (ended.id !== undefined) span.setAttribute("gen_ai.response.id", ended.id);
    if (ended.model !== undefined) span.setAttribute("gen_ai.response.model", ended.model);
    span.setAttribute("gen_ai.usage.input_tokens", usage.inputTokens);
    span.setAttribute("gen_ai.usage.output_tokens", usage.outputTokens);
    if (usage.cachedInputTokens !== undefined)
      span.setAttribute("gen_ai.usage.cache_read.input_tokens", usage.cachedInputTokens);
    if (usage.reasoningTokens !== undefined)
      span.setAttribute("gen_ai.usage.reasoning.output_tokens", usage.reasoningTokens);
    if (this.content) span.setAttribute("gen_ai.output.messages", outputMessages(ended, this.content));
  }

  /** A tool call starts: its `execute_tool` span, in whose context the tool runs. */
  call(prepared: PreparedCall): CallSpan {
    const { call } = prepared;
    const span = this.tracer.startSpan(
      `execute_tool ${call.name}`,
      { kind: SpanKind.INTERNAL, attributes: TOOL_START },
      this.context,
    );
    if (span.isRecording()) {
      span.setAttribute("gen_ai.tool.name", call.name);
      span.setAttribute("gen_ai.tool.call.id", call.id);
      span.setAttribute("gen_ai.tool.type", "function");
      if (this.content) span.setAttribute("gen_ai.tool.call.arguments", this.content(call.arguments || "{}"));
    }
    return new ToolSpan(span, trace.setSpan(this.context, span), this.content, prepared.error !== undefined);
  }

  /** The run stopped or waits: the run's totals, and ERROR for a stop on a failure. */
  ended(state: StoppedState): void {
    const { span } = this;
    this.modelReturned(undefined);
    span.setAttribute("gen_ai.usage.input_tokens", state.usage.inputTokens);
    span.setAttribute("gen_ai.usage.output_tokens", state.usage.outputTokens);
    if (state.usage.cachedInputTokens !== undefined)
      span.setAttribute("gen_ai.usage.cache_read.input_tokens", state.usage.cachedInputTokens);
    if (state.usage.reasoningTokens !== undefined)
      span.setAttribute("gen_ai.usage.reasoning.output_tokens", state.usage.reasoningTokens);
    span.setAttribute("agentloop.stop_reason", state.stopReason);
    span.setAttribute("agentloop.iterations", state.iteration);
    if (state.stopReason === "model_error" || state.stopReason === "circuit_breaker")
      failSpan(span, state.stopReason, state.error?.message);
    span.end();
  }

  /** A checkpoint (or `onEvent` before the handle caught it) threw: the run is over. */
  failed(error: unknown): void {
    this.modelReturned(undefined);
    const name = error instanceof Error ? ((error as { code?: unknown }).code ?? error.name) : "_OTHER";
    failSpan(this.span, String(name), error instanceof Error ? this.redact(error.message) : undefined);
    this.span.end();
  }
}

/** One tool call's span. */
class ToolSpan implements CallSpan {
  constructor(
    private readonly span: Span,
    private readonly context: Context,
    private readonly content: Redact | undefined,
    /** The call could not run (unknown tool, arguments not valid). */
    private readonly invalid: boolean,
  ) {}

  execute(tool: Tool, value: unknown, toolContext: ToolContext): unknown {
    return context.with(this.context, tool.execute, tool, value, toolContext);
  }

  end(outcome: CallOutcome, thrown: unknown): void {
    const { span } = this;
    if (outcome.isError) {
      const type = this.invalid
        ? "invalid_call"
        : thrown instanceof Error && thrown.name !== "Error"
          ? thrown.name
          : "tool_error";
      failSpan(span, type, outcome.content);
    } else if (this.content) span.setAttribute("gen_ai.tool.call.result", outcome.content);
    span.end();
  }
}

function failSpan(span: Span, type: string, message: string | undefined): void {
  span.setAttribute("error.type", type);
  span.setStatus(
    message === undefined ? { code: SpanStatusCode.ERROR } : { code: SpanStatusCode.ERROR, message },
  );
}

/** `server.address` and `server.port` of a base URL. */
function serverOf(baseURL: string | undefined): { address: string; port: number } | undefined {
  if (!baseURL) return undefined;
  try {
    const url = new URL(baseURL);
    const port = url.port ? Number(url.port) : url.protocol === "http:" ? 80 : 443;
    return { address: url.hostname.replace(/^\[|\]$/g, ""), port };
  } catch {
    return undefined;
  }
}

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** A W3C `traceparent` as a remote span context, or undefined when it is not one. */
function parseTraceparent(text: string): SpanContext | undefined {
  const match = TRACEPARENT.exec(text);
  if (!match) return undefined;
  const [, traceId = "", spanId = "", flags = "00"] = match;
  if (/^0+$/.test(traceId) || /^0+$/.test(spanId)) return undefined;
  return { traceId, spanId, traceFlags: Number.parseInt(flags, 16), isRemote: true };
}

function traceparentOf({ traceId, spanId, traceFlags }: SpanContext): string {
  return `00-${traceId}-${spanId}-${(traceFlags & 0xff).toString(16).padStart(2, "0")}`;
}
