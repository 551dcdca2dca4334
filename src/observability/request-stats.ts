/**
 * Request counts and latency histograms per operation, kept by hand rather than with prom-client's
 * Counter/Histogram: those hash their label set on every call, while this is two Map lookups and
 * a few array stores, an order of magnitude cheaper per request (docs/benchmarks.md, "Measurements
 * behind the code"). Rendered in the Prometheus text format at scrape time, next to prom-client's output.
 *
 *   stats.observe('management', 'listIdentities', 'get', 200, 0.0004);
 *   stats.render()  // "# HELP mesh_http_requests_total …\n…"
 */

/** Seconds; from sub-millisecond lookups to slow password hashing under load. */
const LATENCY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'OTHER'];
const METHOD_INDEX: Record<string, number> = Object.fromEntries(METHODS.map((m, i) => [m.toLowerCase(), i]));

interface OpStats {
  /** Non-cumulative counts per bucket; the last slot is +Inf. */
  buckets: Float64Array;
  sum: number;
  count: number;
  /** methodIndex * 1000 + status → requests. */
  byMethodStatus: Map<number, number>;
}

const escape = (v: string) => v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');

export class RequestStats {
  private readonly byApi = new Map<string, Map<string, OpStats>>();

  observe(api: string, operation: string, method: string, status: number, seconds: number): void {
    let ops = this.byApi.get(api);
    if (!ops) this.byApi.set(api, (ops = new Map()));
    let s = ops.get(operation);
    if (!s) ops.set(operation, (s = { buckets: new Float64Array(LATENCY_BUCKETS.length + 1), sum: 0, count: 0, byMethodStatus: new Map() }));
    let i = 0;
    while (i < LATENCY_BUCKETS.length && seconds > LATENCY_BUCKETS[i]) i++;
    s.buckets[i]++;
    s.sum += seconds;
    s.count++;
    const key = (METHOD_INDEX[method] ?? METHODS.length - 1) * 1000 + status;
    s.byMethodStatus.set(key, (s.byMethodStatus.get(key) ?? 0) + 1);
  }

  render(): string {
    const counts: string[] = [
      '# HELP mesh_http_requests_total HTTP requests served, by API, operation, method and status',
      '# TYPE mesh_http_requests_total counter',
    ];
    const hist: string[] = [
      '# HELP mesh_http_request_duration_seconds Time from request to reply ready, by API and operation',
      '# TYPE mesh_http_request_duration_seconds histogram',
    ];
    for (const [api, ops] of this.byApi) {
      for (const [op, s] of ops) {
        const base = `api="${escape(api)}",operation="${escape(op)}"`;
        for (const [key, n] of s.byMethodStatus) {
          counts.push(`mesh_http_requests_total{${base},method="${METHODS[Math.floor(key / 1000)]}",status="${key % 1000}"} ${n}`);
        }
        let cum = 0;
        for (let i = 0; i < LATENCY_BUCKETS.length; i++) {
          cum += s.buckets[i];
          hist.push(`mesh_http_request_duration_seconds_bucket{le="${LATENCY_BUCKETS[i]}",${base}} ${cum}`);
        }
        hist.push(`mesh_http_request_duration_seconds_bucket{le="+Inf",${base}} ${s.count}`);
        hist.push(`mesh_http_request_duration_seconds_sum{${base}} ${s.sum}`);
        hist.push(`mesh_http_request_duration_seconds_count{${base}} ${s.count}`);
      }
    }
    return counts.join('\n') + '\n\n' + hist.join('\n') + '\n';
  }
}
