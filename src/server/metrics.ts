import type { RunResult } from "../core/events.js";

/** A Prometheus histogram: cumulative buckets, sum and count. */
class Histogram {
  private readonly counts: number[];
  private sum = 0;
  private count = 0;

  constructor(private readonly bounds: readonly number[]) {
    this.counts = bounds.map(() => 0);
  }

  observe(value: number): void {
    this.sum += value;
    this.count++;
    this.bounds.forEach((le, i) => {
      if (value <= le) this.counts[i] = (this.counts[i] ?? 0) + 1;
    });
  }

  lines(name: string): string[] {
    return [
      ...this.bounds.map((le, i) => `${name}_bucket{le="${le}"} ${this.counts[i]}`),
      `${name}_bucket{le="+Inf"} ${this.count}`,
      `${name}_sum ${this.sum}`,
      `${name}_count ${this.count}`,
    ];
  }
}

/** Escapes a label value of the text format. */
const label = (value: string) => value.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");

/**
 * The server's counters, rendered in the Prometheus text format (version 0.0.4) at
 * `GET /metrics`: runs by model and stop reason, iterations per run, tool calls and errors,
 * model call latency, chat requests by status, and requests in flight.
 */
export class Metrics {
  private readonly runs = new Map<string, number>();
  private readonly responses = new Map<number, number>();
  private readonly iterations = new Histogram([1, 2, 3, 5, 10, 20, 50, 100]);
  private readonly modelLatency = new Histogram([0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120]);
  private toolCalls = 0;
  private toolErrors = 0;
  private readonly checkpoints = new Histogram([
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1,
  ]);
  private storeErrors = 0;
  private leases = 0;
  private leasesLost = 0;
  private orphans = 0;

  /** @param inFlight reads the number of chat requests being answered now. */
  constructor(private readonly inFlight: () => number = () => 0) {}

  /** Records a finished run of the agent served as `model`. */
  record(model: string, result: RunResult): void {
    const key = `model="${label(model)}",stop_reason="${result.stopReason}"`;
    this.runs.set(key, (this.runs.get(key) ?? 0) + 1);
    this.iterations.observe(result.iterations);
    for (const step of result.steps) {
      this.toolCalls += step.toolCalls;
      this.toolErrors += step.toolErrors;
      this.modelLatency.observe(step.modelMs / 1000);
    }
  }

  /** Records one checkpoint written to the store (or failed, `ok` false), in seconds. */
  checkpoint(seconds: number, ok: boolean): void {
    if (ok) this.checkpoints.observe(seconds);
    else this.storeErrors++;
  }

  /** A session taken (+1) or given up (-1) by this server. */
  lease(change: 1 | -1): void {
    this.leases += change;
  }

  /** A session this server held and lost: its lease ran out and another process took it (and its run) over. */
  leaseLost(): void {
    this.leasesLost++;
  }

  /** An interrupted run this server resumed by itself (`--resume-orphans`). */
  orphanResumed(): void {
    this.orphans++;
  }

  /** Records the status of a chat completion response (200 once a stream has started). */
  response(status: number): void {
    this.responses.set(status, (this.responses.get(status) ?? 0) + 1);
  }

  /**
   * The text format; `store`, read at scrape time, adds the store's gauges: whether it answered,
   * how long that took, and how many runs are interrupted (waiting for a resume).
   */
  render(store?: { up: boolean; pingSeconds: number; interrupted?: number }): string {
    const lines = [
      "# HELP agentloop_runs_total Runs finished, by model and stop reason.",
      "# TYPE agentloop_runs_total counter",
      ...[...this.runs].map(([labels, n]) => `agentloop_runs_total{${labels}} ${n}`),
      "# HELP agentloop_run_iterations Model calls per run.",
      "# TYPE agentloop_run_iterations histogram",
      ...this.iterations.lines("agentloop_run_iterations"),
      "# HELP agentloop_tool_calls_total Tool calls made.",
      "# TYPE agentloop_tool_calls_total counter",
      `agentloop_tool_calls_total ${this.toolCalls}`,
      "# HELP agentloop_tool_errors_total Tool calls that ended in an error result.",
      "# TYPE agentloop_tool_errors_total counter",
      `agentloop_tool_errors_total ${this.toolErrors}`,
      "# HELP agentloop_model_latency_seconds Time of each model call until its reply was complete.",
      "# TYPE agentloop_model_latency_seconds histogram",
      ...this.modelLatency.lines("agentloop_model_latency_seconds"),
      "# HELP agentloop_chat_requests_total Chat completion requests answered, by HTTP status.",
      "# TYPE agentloop_chat_requests_total counter",
      ...[...this.responses].map(([status, n]) => `agentloop_chat_requests_total{status="${status}"} ${n}`),
      "# HELP agentloop_requests_in_flight Chat completion requests being answered.",
      "# TYPE agentloop_requests_in_flight gauge",
      `agentloop_requests_in_flight ${this.inFlight()}`,
    ];
    if (store) {
      lines.push(
        "# HELP agentloop_store_up Whether the store answered this scrape (1) or not (0).",
        "# TYPE agentloop_store_up gauge",
        `agentloop_store_up ${store.up ? 1 : 0}`,
        "# HELP agentloop_store_ping_seconds Time of a round trip to the store at this scrape.",
        "# TYPE agentloop_store_ping_seconds gauge",
        `agentloop_store_ping_seconds ${store.pingSeconds}`,
        "# HELP agentloop_store_checkpoint_seconds Time to write each checkpoint durably.",
        "# TYPE agentloop_store_checkpoint_seconds histogram",
        ...this.checkpoints.lines("agentloop_store_checkpoint_seconds"),
        "# HELP agentloop_store_errors_total Checkpoints the store failed to write.",
        "# TYPE agentloop_store_errors_total counter",
        `agentloop_store_errors_total ${this.storeErrors}`,
        "# HELP agentloop_store_leases_held Sessions (with their runs) held by this server now.",
        "# TYPE agentloop_store_leases_held gauge",
        `agentloop_store_leases_held ${this.leases}`,
        "# HELP agentloop_store_leases_lost_total Sessions this server held and lost: its lease ran out and another process took the run over.",
        "# TYPE agentloop_store_leases_lost_total counter",
        `agentloop_store_leases_lost_total ${this.leasesLost}`,
        "# HELP agentloop_orphan_runs_resumed_total Interrupted runs this server resumed by itself.",
        "# TYPE agentloop_orphan_runs_resumed_total counter",
        `agentloop_orphan_runs_resumed_total ${this.orphans}`,
      );
      if (store.interrupted !== undefined)
        lines.push(
          "# HELP agentloop_store_interrupted_runs Stored runs interrupted and held by nobody (to resume).",
          "# TYPE agentloop_store_interrupted_runs gauge",
          `agentloop_store_interrupted_runs ${store.interrupted}`,
        );
    }
    return `${lines.join("\n")}\n`;
  }
}
