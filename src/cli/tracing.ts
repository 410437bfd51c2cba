/**
 * OTLP export of the CLI's and `serve`'s traces (SPEC section 11), from the standard `OTEL_*`
 * variables. Loaded (with the OpenTelemetry SDK and exporter it imports) only when `wantsTraces`
 * (tracing-env.ts) says so. Never fails a command: a setting it cannot use is one
 * warning line and the command goes on untraced; a collector that cannot be reached is one warning
 * line (per process) and at most `FLUSH_MS` at exit. Header values are never written anywhere.
 */
import { context, propagation, trace } from "@opentelemetry/api";
import { ExportResultCode, W3CTraceContextPropagator } from "@opentelemetry/core";
import { defaultResource, envDetector, resourceFromAttributes } from "@opentelemetry/resources";
import { BatchSpanProcessor, type SpanExporter, TracerProvider } from "@opentelemetry/sdk-trace";
import { redactSecrets } from "../core/redact.js";
import { AsyncContextManager } from "../tracing/context-manager.js";

/** The longest an export may take (each request, its retries included), and the exit's flush. */
const EXPORT_MS = 2_500;
const FLUSH_MS = 3_000;

type Env = NodeJS.ProcessEnv;
type Warn = (line: string) => void;

/** What `startTracing` set up: flush and stop it before the process exits. */
export interface Tracing {
  /** Sends what is left, waiting at most `FLUSH_MS`; never rejects. */
  shutdown(): Promise<void>;
}

/**
 * Registers an SDK tracer provider exporting over OTLP/HTTP (`http/protobuf` by default, or
 * `http/json`), the W3C trace context propagator and a context manager; undefined (after one
 * warning line) when the settings cannot be used.
 */
export async function startTracing(env: Env, warn: Warn): Promise<Tracing | undefined> {
  const settings = exportSettings(env);
  if (typeof settings === "string") {
    warn(`agentloop: warning: ${settings}: the run goes on untraced`);
    return undefined;
  }
  const { url, headers, protocol } = settings;
  const { OTLPTraceExporter } =
    protocol === "http/json"
      ? await import("@opentelemetry/exporter-trace-otlp-http")
      : await import("@opentelemetry/exporter-trace-otlp-proto");
  const secrets = Object.values(headers);
  const where = safeUrl(url);
  const warned = { done: false };
  const failed = (reason: string) => {
    if (warned.done) return;
    warned.done = true;
    const detail = redactSecrets(reason.replace(/\s+/g, " ").trim(), secrets, 300);
    warn(`agentloop: warning: traces could not be sent to ${where}: ${detail}`);
  };
  const exporter = warningExporter(new OTLPTraceExporter({ url, headers, timeoutMillis: EXPORT_MS }), failed);
  const resource = defaultResource()
    .merge(resourceFromAttributes({ "service.name": "agentloop" }))
    .merge(resourceFromAttributes(envDetector.detect().attributes ?? {}));
  const provider = new TracerProvider({
    resource,
    spanProcessors: [
      new BatchSpanProcessor({ exporter, exportTimeoutMillis: EXPORT_MS, ...batchSettings(env) }),
    ],
  });
  trace.setGlobalTracerProvider(provider);
  context.setGlobalContextManager(new AsyncContextManager());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  return {
    shutdown: async () => {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const late = new Promise<"late">((resolve) => {
        timer = setTimeout(() => resolve("late"), FLUSH_MS);
      });
      const done = provider.shutdown().then(
        () => "done" as const,
        (error: unknown) => {
          failed(error instanceof Error ? error.message : String(error));
          return "done" as const;
        },
      );
      if ((await Promise.race([done, late])) === "late") failed(`no answer within ${FLUSH_MS / 1000} s`);
      clearTimeout(timer);
    },
  };
}

/** The exporter, telling `failed` why an export failed. */
function warningExporter(inner: SpanExporter, failed: (reason: string) => void): SpanExporter {
  return {
    export: (spans, done) =>
      inner.export(spans, (result) => {
        if (result.code !== ExportResultCode.SUCCESS) failed(result.error?.message || "the export failed");
        done(result);
      }),
    shutdown: () => inner.shutdown(),
    forceFlush: () => inner.forceFlush?.() ?? Promise.resolve(),
  };
}

/** The batch processor's standard variables (`OTEL_BSP_*`), where set to a positive number. */
function batchSettings(env: Env) {
  const read = (name: string) => {
    const n = Number(value(env, name));
    return Number.isFinite(n) && n > 0 ? n : undefined;
  };
  const settings: { scheduledDelayMillis?: number; maxQueueSize?: number; maxExportBatchSize?: number } = {};
  const delay = read("OTEL_BSP_SCHEDULE_DELAY");
  if (delay !== undefined) settings.scheduledDelayMillis = delay;
  const queue = read("OTEL_BSP_MAX_QUEUE_SIZE");
  if (queue !== undefined) settings.maxQueueSize = queue;
  const batch = read("OTEL_BSP_MAX_EXPORT_BATCH_SIZE");
  if (batch !== undefined) settings.maxExportBatchSize = batch;
  return settings;
}

/** Where traces go and how, from the environment; or what is wrong with it (naming the variable, never its value). */
function exportSettings(
  env: Env,
): { url: string; headers: Record<string, string>; protocol: "http/protobuf" | "http/json" } | string {
  const exporter = value(env, "OTEL_TRACES_EXPORTER");
  if (exporter !== undefined && !exporter.split(",").some((name) => name.trim() === "otlp"))
    return `OTEL_TRACES_EXPORTER=${exporter.slice(0, 40)} is not supported (otlp or none)`;
  const protocolVar = value(env, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
    ? "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
    : "OTEL_EXPORTER_OTLP_PROTOCOL";
  const protocol = value(env, protocolVar) ?? "http/protobuf";
  if (protocol !== "http/protobuf" && protocol !== "http/json")
    return `${protocolVar}=${protocol.slice(0, 40)} is not supported (http/protobuf or http/json)`;
  const specific = value(env, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
  const endpointVar = specific ? "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" : "OTEL_EXPORTER_OTLP_ENDPOINT";
  const endpoint = specific ?? value(env, "OTEL_EXPORTER_OTLP_ENDPOINT") ?? "";
  const url = specific ? endpoint : `${endpoint.replace(/\/+$/, "")}/v1/traces`;
  if (!isHttpUrl(url)) return `${endpointVar} is not an http(s) URL (e.g. http://localhost:4318)`;
  const headers: Record<string, string> = {};
  for (const name of ["OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"]) {
    const parsed = parseHeaders(value(env, name) ?? "");
    if (!parsed) return `${name} is malformed (expected name=value pairs separated by commas)`;
    Object.assign(headers, parsed);
  }
  return { url, headers, protocol };
}

const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** W3C Baggage-style `name=value,name2=value2` (values percent-decoded); undefined when malformed. */
function parseHeaders(text: string): Record<string, string> | undefined {
  const headers: Record<string, string> = {};
  for (const pair of text.split(",")) {
    if (pair.trim() === "") continue;
    const at = pair.indexOf("=");
    if (at < 0) return undefined;
    const name = pair.slice(0, at).trim();
    if (!HEADER_NAME.test(name)) return undefined;
    try {
      headers[name] = decodeURIComponent(pair.slice(at + 1).trim());
    } catch {
      return undefined;
    }
    if (/[\r\n\0]/.test(headers[name] as string)) return undefined;
  }
  return headers;
}

function isHttpUrl(text: string): boolean {
  try {
    const url = new URL(text);
    return url.protocol === "http:" || url.protocol === "https:";
  } catch {
    return false;
  }
}

/** A URL without its credentials or query, fit for a message. */
function safeUrl(text: string): string {
  const url = new URL(text);
  return `${url.protocol}//${url.host}${url.pathname}`;
}

function value(env: Env, name: string): string | undefined {
  const v = env[name]?.trim();
  return v ? v : undefined;
}
