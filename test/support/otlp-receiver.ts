/**
 * A real OTLP/HTTP trace receiver on 127.0.0.1 for tests: it takes what the official exporters
 * send to `POST /v1/traces`, protobuf (decoded here from the field numbers of the OTLP .proto
 * definitions: opentelemetry/proto/collector/trace/v1/trace_service.proto, trace/v1/trace.proto,
 * common/v1/common.proto, resource/v1/resource.proto) or JSON, into plain spans.
 */
import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  /** "" for a root span. */
  parentSpanId: string;
  name: string;
  /** SpanKind of the proto: 1 internal, 2 server, 3 client. */
  kind: number;
  attributes: Record<string, unknown>;
  /** StatusCode of the proto: 0 unset, 1 ok, 2 error. */
  status: { code: number; message: string };
  /** The attributes of its resource. */
  resource: Record<string, unknown>;
  scope: string;
}

export interface OtlpReceiver {
  /** E.g. `http://127.0.0.1:4318` (the exporters append `/v1/traces`). */
  readonly url: string;
  readonly spans: ReceivedSpan[];
  /** Every request's content type and headers, in order. */
  readonly requests: { contentType: string; headers: IncomingMessage["headers"] }[];
  close(): Promise<void>;
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const requests: OtlpReceiver["requests"] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      const contentType = String(req.headers["content-type"] ?? "");
      requests.push({ contentType, headers: req.headers });
      if (req.method !== "POST" || req.url !== "/v1/traces") {
        res.writeHead(404).end();
        return;
      }
      if (contentType.startsWith("application/json")) {
        spans.push(...fromJson(JSON.parse(body.toString("utf8"))));
        res.writeHead(200, { "content-type": "application/json" }).end("{}");
      } else {
        spans.push(...fromProtobuf(body));
        res.writeHead(200, { "content-type": "application/x-protobuf" }).end();
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    requests,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

// ---- OTLP/JSON ----

type J = Record<string, unknown>;
const list = (v: unknown): J[] => (Array.isArray(v) ? (v as J[]) : []);

function fromJson(body: J): ReceivedSpan[] {
  const out: ReceivedSpan[] = [];
  for (const rs of list(body.resourceSpans)) {
    const resource = jsonAttributes((rs.resource as J | undefined)?.attributes);
    for (const ss of list(rs.scopeSpans)) {
      const scope = String((ss.scope as J | undefined)?.name ?? "");
      for (const s of list(ss.spans)) {
        const status = (s.status ?? {}) as J;
        out.push({
          traceId: hexId(s.traceId),
          spanId: hexId(s.spanId),
          parentSpanId: hexId(s.parentSpanId),
          name: String(s.name),
          kind: Number(s.kind ?? 0),
          attributes: jsonAttributes(s.attributes),
          status: { code: Number(status.code ?? 0), message: String(status.message ?? "") },
          resource,
          scope,
        });
      }
    }
  }
  return out;
}

/** Ids are hex in OTLP/JSON; base64 is accepted too. */
function hexId(v: unknown): string {
  if (typeof v !== "string" || v === "") return "";
  return /^[0-9a-f]+$/i.test(v) && (v.length === 32 || v.length === 16)
    ? v.toLowerCase()
    : Buffer.from(v, "base64").toString("hex");
}

function jsonAttributes(v: unknown): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const kv of list(v)) out[String(kv.key)] = jsonValue(kv.value as J);
  return out;
}

function jsonValue(v: J | undefined): unknown {
  if (!v) return undefined;
  if ("stringValue" in v) return v.stringValue;
  if ("boolValue" in v) return v.boolValue;
  if ("intValue" in v) return Number(v.intValue);
  if ("doubleValue" in v) return Number(v.doubleValue);
  if ("arrayValue" in v) return list((v.arrayValue as J).values).map(jsonValue);
  return undefined;
}

// ---- OTLP/protobuf ----

/** One field of a message: its number, and its value (a varint, fixed bits, or the bytes of a length-delimited field). */
interface Field {
  no: number;
  varint?: bigint;
  bytes?: Buffer;
  fixed?: Buffer;
}

function fields(buf: Buffer): Field[] {
  const out: Field[] = [];
  let at = 0;
  const varint = (): bigint => {
    let result = 0n;
    let shift = 0n;
    for (;;) {
      const byte = buf[at++] as number;
      result |= BigInt(byte & 0x7f) << shift;
      if ((byte & 0x80) === 0) return result;
      shift += 7n;
    }
  };
  while (at < buf.length) {
    const tag = Number(varint());
    const no = tag >>> 3;
    switch (tag & 7) {
      case 0:
        out.push({ no, varint: varint() });
        break;
      case 1:
        out.push({ no, fixed: buf.subarray(at, at + 8) });
        at += 8;
        break;
      case 2: {
        const length = Number(varint());
        out.push({ no, bytes: buf.subarray(at, at + length) });
        at += length;
        break;
      }
      case 5:
        out.push({ no, fixed: buf.subarray(at, at + 4) });
        at += 4;
        break;
      default:
        throw new Error(`unexpected wire type ${tag & 7}`);
    }
  }
  return out;
}

const all = (fs: Field[], no: number) => fs.filter((f) => f.no === no);
const bytesOf = (fs: Field[], no: number) => all(fs, no).at(-1)?.bytes ?? Buffer.alloc(0);
const textOf = (fs: Field[], no: number) => bytesOf(fs, no).toString("utf8");
const varintOf = (fs: Field[], no: number) => all(fs, no).at(-1)?.varint ?? 0n;

function fromProtobuf(body: Buffer): ReceivedSpan[] {
  const out: ReceivedSpan[] = [];
  // ExportTraceServiceRequest: repeated ResourceSpans resource_spans = 1;
  for (const rsField of all(fields(body), 1)) {
    // ResourceSpans: Resource resource = 1; repeated ScopeSpans scope_spans = 2;
    const rs = fields(rsField.bytes as Buffer);
    // Resource: repeated KeyValue attributes = 1;
    const resource = protoAttributes(all(fields(bytesOf(rs, 1)), 1));
    for (const ssField of all(rs, 2)) {
      // ScopeSpans: InstrumentationScope scope = 1 (name = 1); repeated Span spans = 2;
      const ss = fields(ssField.bytes as Buffer);
      const scope = textOf(fields(bytesOf(ss, 1)), 1);
      for (const spanField of all(ss, 2)) {
        // Span: trace_id = 1, span_id = 2, parent_span_id = 4, name = 5, kind = 6, attributes = 9, status = 15
        const s = fields(spanField.bytes as Buffer);
        // Status: message = 2, code = 3
        const status = fields(bytesOf(s, 15));
        out.push({
          traceId: bytesOf(s, 1).toString("hex"),
          spanId: bytesOf(s, 2).toString("hex"),
          parentSpanId: bytesOf(s, 4).toString("hex"),
          name: textOf(s, 5),
          kind: Number(varintOf(s, 6)),
          attributes: protoAttributes(all(s, 9)),
          status: { code: Number(varintOf(status, 3)), message: textOf(status, 2) },
          resource,
          scope,
        });
      }
    }
  }
  return out;
}

/** KeyValue: key = 1, value = 2 (an AnyValue). */
function protoAttributes(kvs: Field[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const kv of kvs) {
    const f = fields(kv.bytes as Buffer);
    out[textOf(f, 1)] = protoValue(fields(bytesOf(f, 2)));
  }
  return out;
}

/** AnyValue: string_value = 1, bool_value = 2, int_value = 3, double_value = 4, array_value = 5 (ArrayValue: values = 1). */
function protoValue(f: Field[]): unknown {
  const field = f.at(-1);
  if (!field) return undefined;
  switch (field.no) {
    case 1:
      return (field.bytes as Buffer).toString("utf8");
    case 2:
      return field.varint === 1n;
    case 3:
      return Number(BigInt.asIntN(64, field.varint as bigint));
    case 4:
      return (field.fixed as Buffer).readDoubleLE(0);
    case 5:
      return all(fields(field.bytes as Buffer), 1).map((v) => protoValue(fields(v.bytes as Buffer)));
    default:
      return undefined;
  }
}
