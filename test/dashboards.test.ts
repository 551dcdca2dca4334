/**
 * The Grafana dashboard and the Prometheus alert rules under deploy/ name only metrics that the
 * controller serves on /metrics (read from a real server), and the dashboard shows every
 * controller metric (mesh_*) there is.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { load } from 'js-yaml';
import t from 'tap';
import { startServer } from './helpers/server.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const DASHBOARD = path.join(ROOT, 'deploy', 'grafana', 'mesh-controller.json');
const RULES = path.join(ROOT, 'deploy', 'prometheus', 'mesh-controller.rules.yml');
const METRIC = /\b(?:mesh|process|nodejs)_[a-z0-9_]+/g;

/** Every PromQL expression of the dashboard: panel targets and template variable queries. */
function dashboardExprs(d: any): string[] {
  const out: string[] = [];
  const walk = (v: any) => {
    if (Array.isArray(v)) v.forEach(walk);
    else if (v && typeof v === 'object') {
      if (typeof v.expr === 'string') out.push(v.expr);
      if (typeof v.definition === 'string') out.push(v.definition);
      Object.values(v).forEach(walk);
    }
  };
  walk(d.panels);
  walk(d.templating);
  return out;
}

/** Names served: sample names, and every family's declared name (histograms add _bucket/_sum/_count). */
function served(text: string): Set<string> {
  const names = new Set<string>();
  for (const line of text.split('\n')) {
    const type = /^# TYPE (\S+) (\S+)/.exec(line);
    if (type) {
      names.add(type[1]);
      if (type[2] === 'histogram' || type[2] === 'summary') for (const s of ['_bucket', '_sum', '_count']) names.add(type[1] + s);
      continue;
    }
    const sample = /^([a-zA-Z_:][a-zA-Z0-9_:]*)[{ ]/.exec(line);
    if (sample) names.add(sample[1]);
  }
  return names;
}

t.test('every metric the dashboard and the alert rules name is served by /metrics', async (t) => {
  const dashboard = JSON.parse(fs.readFileSync(DASHBOARD, 'utf8'));
  t.equal(dashboard.uid, 'mesh-controller');
  t.ok(dashboard.__inputs?.some((i: any) => i.pluginId === 'prometheus'), 'asks for a Prometheus data source on import');
  for (const p of dashboard.panels.filter((p: any) => p.type !== 'row')) {
    t.ok(p.targets?.length > 0 && p.gridPos, `panel "${p.title}" has queries and a place`);
  }
  const rules = load(fs.readFileSync(RULES, 'utf8')) as any;
  const ruleExprs: string[] = rules.groups.flatMap((g: any) => g.rules.map((r: any) => {
    t.ok(r.alert && r.labels?.severity && r.annotations?.summary, `rule ${r.alert} has a name, a severity and a summary`);
    return String(r.expr);
  }));
  t.ok(ruleExprs.length >= 5, 'alert rules');

  const srv = await startServer(t);
  const admin = await srv.login();
  t.equal((await admin.get('/identities')).status, 200, 'a request, so the request metrics have samples');
  const text = (await srv.raw('GET', '/metrics')).text;
  const have = served(text);
  const named = new Map<string, string>();
  for (const [where, exprs] of [['dashboard', dashboardExprs(dashboard)], ['alert rules', ruleExprs]] as const) {
    t.ok(exprs.length > 0, `${where} has expressions`);
    for (const e of exprs) for (const m of e.match(METRIC) ?? []) named.set(m, where);
  }
  t.ok(named.size >= 20, `${named.size} metrics named`);
  for (const [name, where] of named) t.ok(have.has(name), `${name} (${where}) is served by /metrics`);

  const dashNames = new Set(dashboardExprs(dashboard).flatMap((e) => e.match(METRIC) ?? []).map((n) => n.replace(/_(bucket|sum|count)$/, '')));
  for (const line of text.split('\n')) {
    const m = /^# TYPE (mesh_\S+)/.exec(line);
    if (m) t.ok(dashNames.has(m[1]), `the dashboard shows ${m[1]}`);
  }
});
