import type { RunResult } from "../core/events.js";

/** Counters of the server, rendered in the Prometheus text format at `GET /metrics`. */
export class Metrics {
  private readonly stops = new Map<string, number>();
  private runs = 0;
  private iterations = 0;
  private toolCalls = 0;
  private toolErrors = 0;
  private modelCalls = 0;
  private modelSeconds = 0;
  inFlight = 0;

  record(result: RunResult): void {
    this.runs++;
    this.stops.set(result.stopReason, (this.stops.get(result.stopReason) ?? 0) + 1);
    this.iterations += result.iterations;
    for (const step of result.steps) {
      this.toolCalls += step.toolCalls;
      this.toolErrors += step.toolErrors;
      this.modelCalls++;
      this.modelSeconds += step.modelMs / 1000;
    }
  }

  render(): string {
    const lines = [
      "# HELP agentloop_runs_total Runs finished, by stop reason.",
      "# TYPE agentloop_runs_total counter",
      ...[...this.stops].map(([reason, n]) => `agentloop_runs_total{stop_reason="${reason}"} ${n}`),
      "# HELP agentloop_run_iterations Model calls per run.",
      "# TYPE agentloop_run_iterations summary",
      `agentloop_run_iterations_sum ${this.iterations}`,
      `agentloop_run_iterations_count ${this.runs}`,
      "# HELP agentloop_tool_calls_total Tool calls made.",
      "# TYPE agentloop_tool_calls_total counter",
      `agentloop_tool_calls_total ${this.toolCalls}`,
      "# HELP agentloop_tool_errors_total Tool calls that ended in an error result.",
      "# TYPE agentloop_tool_errors_total counter",
      `agentloop_tool_errors_total ${this.toolErrors}`,
      "# HELP agentloop_model_latency_seconds Time of each model call until its reply was complete.",
      "# TYPE agentloop_model_latency_seconds summary",
      `agentloop_model_latency_seconds_sum ${this.modelSeconds}`,
      `agentloop_model_latency_seconds_count ${this.modelCalls}`,
      "# HELP agentloop_requests_in_flight Chat completion requests being answered.",
      "# TYPE agentloop_requests_in_flight gauge",
      `agentloop_requests_in_flight ${this.inFlight}`,
    ];
    return `${lines.join("\n")}\n`;
  }
}
