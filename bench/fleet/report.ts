/**
 * The fleet run's outputs: the one-screen terminal summary and the SVG chart (throughput and p99
 * latency per operation over the run, controller CPU and RSS), from the result object main.ts
 * writes as JSON.
 */
import type { OpSummary, TimelinePoint } from '../lib/ops.js';
import type { ProcessSample } from '../lib/sampler.js';
import type { Ceilings } from '../lib/ceilings.js';
import { renderChart, type Series } from '../lib/chart.js';
import { fmt, table, type MachineInfo } from '../lib/report.js';

export interface PhaseResult {
  name: string;
  /** Seconds since the controller started (the chart's time axis). */
  from: number;
  to: number;
  ops: Record<string, OpSummary>;
  /** Why the phase did not run, when it did not. */
  skipped?: string;
  /**
   * CPU used during the phase (ms): by the controller (all its threads, from /proc) and by this
   * load generator; and the controller's CPU per successful device operation of the phase. On a
   * shared machine these stay meaningful when rates do not.
   */
  cpu?: { controllerMs: number; generatorMs: number; deviceOps: number; controllerMsPerOp: number; generatorMsPerOp: number };
}

export interface Ratio {
  what: string;
  controllerPerSec: number;
  ceilingPerSec: number;
  ratio: number;
}

export interface FleetResult {
  bench: 'fleet';
  startedAt: string;
  passed: boolean;
  failures: string[];
  parameters: Record<string, unknown>;
  machine: MachineInfo;
  model: Record<string, unknown> & { shape: string; counts: Record<string, number>; writeMs: number };
  modelCheck: Record<string, { expected: number; actual: number | null; ok: boolean }>;
  ceilings?: Ceilings;
  phases: PhaseResult[];
  ratios: Ratio[];
  errors: { total: number; fatal: Record<string, number>; other: Record<string, number>; notImplemented: string[] };
  controller: { cpuPctMean: number; cpuPctMax: number; rssPeakMiB: number; samples: ProcessSample[]; exit?: unknown };
  routers: unknown;
  /** Requests sent again because the server closed their idle kept-alive socket (never counted as errors, never hidden). */
  keepAliveRetries?: number;
  admin: { policyChanges: number; sessionsExpired: number };
  timeline: TimelinePoint[];
  files?: { json: string; chart: string };
}

const n0 = (x: number | undefined) => (x === undefined || !Number.isFinite(x) ? '-' : Math.round(x).toLocaleString('en'));

export function terminalSummary(r: FleetResult): string {
  const out: string[] = [];
  const p = r.parameters as Record<string, any>;
  const c = r.model.counts;
  out.push('');
  out.push(`bench/fleet  model "${r.model.shape}" (${n0(c.identities)} identities, ${n0(c.services)} services, ${n0(c.edgeRouters)} edge routers, ${c.servicePolicies}/${c.edgeRouterPolicies}/${c.serviceEdgeRouterPolicies} policies), seed ${p.seed}`);
  out.push(`  ${p.devices} devices, concurrency ${p.concurrency}, mix ${p.durationS} s (${p.mix}); ${r.machine.cpus} cpus, node ${r.machine.node}, load at start ${r.machine.loadavg.join(' ')}`);
  const checkOk = Object.values(r.modelCheck).every((x) => x.ok);
  out.push(`  model written (${r.model.via}) in ${fmt(r.model.writeMs / 1000, 1)} s; sizes through the Management API: ${checkOk ? 'as planned' : 'MISMATCH ' + JSON.stringify(r.modelCheck)}`);
  if (r.ceilings) {
    const k = r.ceilings;
    out.push(`  ceilings: uWS JSON ${n0(k.uwsJson.okPerSec)} req/s (p99 ${fmt(k.uwsJson.latencyMs.p99)} ms) · raw mTLS handshake ${n0(k.mtlsHandshake.okPerSec)}/s · raw CSR signing ${n0(k.csrSign.okPerSec)}/s per thread (@peculiar/x509: ${n0(k.csrSignPeculiar.okPerSec)}/s)`);
  }
  out.push('');
  const rows: string[][] = [];
  for (const ph of r.phases) {
    if (ph.skipped) {
      rows.push([ph.name, '(skipped)', '', '', '', '', '', '', ph.skipped]);
      continue;
    }
    const names = Object.keys(ph.ops).sort();
    names.forEach((op, i) => {
      const s = ph.ops[op];
      const errs = Object.entries(s.errors).map(([k, v]) => `${v}× ${k}`).join(', ');
      rows.push([i === 0 ? ph.name : '', op, n0(s.ok), fmt(s.okPerSec, 1), fmt(s.latencyMs.p50), fmt(s.latencyMs.p95), fmt(s.latencyMs.p99), fmt(s.latencyMs.max), errs.length > 60 ? errs.slice(0, 57) + '...' : errs || '0']);
    });
  }
  out.push(table(['phase', 'operation', 'ok', 'ok/s', 'p50 ms', 'p95 ms', 'p99 ms', 'max ms', 'errors'], rows));
  if (r.ratios.length) {
    out.push('');
    for (const x of r.ratios) out.push(`  ${x.what}: ${fmt(x.controllerPerSec, 1)}/s = ${fmt(x.ratio * 100, 1)}% of the ceiling (${fmt(x.ceilingPerSec, 1)}/s)`);
  }
  const cpuRows = r.phases.filter((ph) => ph.cpu && ph.cpu.deviceOps > 0).map((ph) => `${ph.name} ${fmt(ph.cpu!.controllerMsPerOp, 2)} ms (generator ${fmt(ph.cpu!.generatorMsPerOp, 2)} ms)`);
  if (cpuRows.length) out.push(`  controller CPU per device operation: ${cpuRows.join(' · ')}`);
  out.push('');
  out.push(`  controller: CPU mean ${fmt(r.controller.cpuPctMean, 0)}% / max ${fmt(r.controller.cpuPctMax, 0)}% of one core; RSS peak ${fmt(r.controller.rssPeakMiB, 0)} MiB`);
  const rt = r.routers as { simulated: boolean; reason?: string; requested: number; report?: { connected: number; reports: number; onlineInApi?: number } };
  out.push(`  routers: ${rt.simulated ? `${rt.report?.connected ?? '?'} of ${rt.requested} enrolled and connected, ${rt.report?.onlineInApi ?? '?'} online in the Management API, ${rt.report?.reports ?? 0} state reports` : `not simulated — ${rt.reason}`}`);
  if (r.keepAliveRetries) out.push(`  requests re-sent because the server closed their idle keep-alive socket: ${r.keepAliveRetries}`);
  out.push(`  admins: ${r.admin.policyChanges} policy changes, ${r.admin.sessionsExpired} API sessions expired during the mix`);
  if (r.errors.notImplemented.length) out.push(`  NOT IMPLEMENTED (501) in this controller: ${r.errors.notImplemented.join(', ')}`);
  if (r.errors.total > 0) {
    const list = (m: Record<string, number>) => Object.entries(m).map(([k, v]) => `${v}× ${k}`).join('; ');
    if (Object.keys(r.errors.fatal).length) out.push(`  5xx / timeouts / dropped connections: ${list(r.errors.fatal)}`);
    if (Object.keys(r.errors.other).length) out.push(`  other errors: ${list(r.errors.other)}`);
  }
  out.push(r.passed ? '  RESULT: PASS — zero errors' : `  RESULT: FAIL — ${r.failures.join('; ')}`);
  if (r.files) out.push(`  results: ${r.files.json}  chart: ${r.files.chart}`);
  return out.join('\n') + '\n';
}

export function fleetChart(r: FleetResult): string {
  const names = [...new Set(r.timeline.flatMap((pt) => Object.keys(pt.ops)))].sort();
  const series = (f: (x: { ok: number; errors: number; p50: number; p99: number }) => number): Series[] =>
    // One-second buckets, plotted at their middle.
    names.map((name) => ({ name, points: r.timeline.map((pt) => [pt.t + 0.5, pt.ops[name] ? f(pt.ops[name]) : name.startsWith('admin') ? NaN : 0] as [number, number]) }));
  const errors: Series = { name: 'errors (all operations)', points: r.timeline.map((pt) => [pt.t + 0.5, Object.values(pt.ops).reduce((a, o) => a + o.errors, 0)] as [number, number]) };
  const c = r.model.counts;
  return renderChart({
    title: `bench/fleet — model "${r.model.shape}", ${(r.parameters as any).devices} devices, ${r.passed ? 'PASS' : 'FAIL'}`,
    subtitle: `${c.identities} identities, ${c.services} services, ${c.edgeRouters} edge routers · concurrency ${(r.parameters as any).concurrency} · ${r.startedAt} · ${r.machine.cpus} cpus, load ${r.machine.loadavg.join(' ')}`,
    phases: r.phases.filter((p) => !p.skipped).map((p) => ({ name: p.name, from: p.from, to: p.to })),
    panels: [
      { title: 'throughput per operation', unit: 'ok/s', series: series((x) => x.ok) },
      { title: 'p99 latency per operation', unit: 'ms', log: true, series: series((x) => (x.ok > 0 ? x.p99 : NaN)) },
      { title: 'errors', unit: 'per s', series: [errors] },
      { title: 'controller CPU', unit: '% of one core', series: [{ name: 'CPU', points: r.controller.samples.map((s) => [s.t, s.cpuPct]) }] },
      { title: 'controller resident memory', unit: 'MiB', series: [{ name: 'RSS', points: r.controller.samples.map((s) => [s.t, s.rssMiB]) }] },
    ],
  });
}
