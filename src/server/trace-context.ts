import { context, propagation, type TextMapGetter } from "@opentelemetry/api";
import type { MiddlewareHandler } from "hono";

/** Reads a request's `Headers` for the propagator. */
const fromHeaders: TextMapGetter<Headers> = {
  get: (headers, key) => headers.get(key) ?? undefined,
  keys: (headers) => [...headers.keys()],
};

/**
 * Continues an incoming W3C `traceparent` (SPEC section 11): the rest of the request, and so the
 * runs it starts, has the caller's trace context as its active context, so their `invoke_agent`
 * spans join the caller's trace. The registered propagator reads it (the CLI's `serve` registers the
 * W3C one; with none, or no `traceparent` header, nothing changes). A stored run resumed by a
 * request keeps its own trace.
 */
export const traceContext: MiddlewareHandler = (c, next) => {
  const headers = c.req.raw.headers;
  if (!headers.has("traceparent")) return next();
  return context.with(propagation.extract(context.active(), headers, fromHeaders), next);
};
