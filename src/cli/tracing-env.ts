/**
 * Whether the environment asks for traces to be exported (SPEC section 11): an OTLP endpoint is set,
 * and neither `OTEL_TRACES_EXPORTER=none` nor `OTEL_SDK_DISABLED=true` says otherwise. Only then
 * does the CLI load tracing.ts and the OpenTelemetry SDK.
 */
export function wantsTraces(env: NodeJS.ProcessEnv): boolean {
  const endpoint = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim() || env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  return (
    Boolean(endpoint) &&
    env.OTEL_TRACES_EXPORTER?.trim() !== "none" &&
    env.OTEL_SDK_DISABLED?.trim().toLowerCase() !== "true"
  );
}
