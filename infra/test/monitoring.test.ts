/**
 * The monitoring kit: Prometheus's scrape config and alert rules, Grafana's provisioning and dashboard. No Prometheus,
 * promtool or Grafana runs here, so these are checked by construction: the files parse, what they name exists (compose
 * services, mounted paths, the gateway's API port, the provisioned datasource), the rules have what promtool's
 * `check rules` asks of them (names, `for` durations, balanced expressions, known functions), and every metric the
 * rules and the dashboard read is one the gateway exports: packages/gateway/src/metrics.ts or prom-client's defaults,
 * as a node's registry lists them.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { createMetrics } from '../../packages/gateway/src/metrics.ts';
import { composeGatewayConfig, read, readYaml, service, traefik, withDefaults } from './support.ts';

interface Rule {
  alert?: string;
  record?: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

interface Prometheus {
  global: { scrape_interval: string; evaluation_interval: string };
  rule_files: string[];
  scrape_configs: Array<{
    job_name: string;
    metrics_path?: string;
    dns_sd_configs?: Array<{ names: string[]; type: string; port: number }>;
    static_configs?: Array<{ targets: string[] }>;
  }>;
}

const prometheus = readYaml<Prometheus>('infra/prometheus/prometheus.yml');
const rules = readYaml<{ groups: Array<{ name: string; rules: Rule[] }> }>('infra/prometheus/alerts.yml');
const dashboard = JSON.parse(read('infra/grafana/dashboards/herald.json')) as {
  uid: string;
  panels: Array<{ id: number; type: string; title: string; datasource?: { uid: string }; gridPos: { x: number; y: number; w: number; h: number }; targets?: Array<{ expr: string; refId: string }> }>;
};

/** Where a service mounts a repository path, by container path. */
function mountSource(serviceName: string, target: string): string | undefined {
  return service(serviceName)
    .volumes?.map((volume) => withDefaults(volume).split(':'))
    .find(([, at]) => at === target)?.[0];
}

/** Every sample name a node exports: each metric's name, and a histogram's _bucket, _sum and _count. */
async function exportedNames(): Promise<Set<string>> {
  const names = new Set(['up']); // Prometheus's own, per target
  for (const metric of await createMetrics().registry.getMetricsAsJSON()) {
    names.add(metric.name);
    // prom-client's types call it an enum; at run time it is the exposition's word.
    const type = String(metric.type);
    if (type === 'histogram' || type === 'summary') {
      for (const suffix of ['_bucket', '_sum', '_count']) names.add(`${metric.name}${suffix}`);
    }
  }
  return names;
}

const FUNCTIONS = new Set([
  'abs', 'absent', 'avg', 'avg_over_time', 'ceil', 'clamp_min', 'clamp_max', 'count', 'delta', 'deriv', 'floor',
  'histogram_quantile', 'increase', 'irate', 'max', 'max_over_time', 'min', 'min_over_time', 'rate', 'round', 'sum',
  'topk', 'bottomk', 'quantile', 'vector', 'scalar', 'time', 'changes', 'resets',
]);
const KEYWORDS = new Set(['and', 'or', 'unless', 'bool', 'offset']);

/**
 * The metric names a PromQL expression reads, after checking what promtool would refuse first: unbalanced brackets,
 * an unknown function. Strings, label matchers, ranges and grouping clauses are left out before names are picked.
 */
function metricNamesOf(expr: string): string[] {
  const stack: string[] = [];
  const pairs: Record<string, string> = { ')': '(', ']': '[', '}': '{' };
  for (const c of expr.replace(/"(?:[^"\\]|\\.)*"/g, '""')) {
    if ('([{'.includes(c)) stack.push(c);
    else if (c in pairs) assert.equal(stack.pop(), pairs[c], `balanced brackets in: ${expr}`);
  }
  assert.equal(stack.length, 0, `balanced brackets in: ${expr}`);
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, '')
    .replace(/\[[^\]]*\]/g, '')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, '');
  const names: string[] = [];
  for (const match of bare.matchAll(/[A-Za-z_:][A-Za-z0-9_:]*/g)) {
    const [word] = match;
    const after = bare.slice(match.index + word.length).trimStart();
    if (after.startsWith('(')) assert.ok(FUNCTIONS.has(word), `a PromQL function: ${word} in ${expr}`);
    else if (!KEYWORDS.has(word)) names.push(word);
  }
  return names;
}

describe('Prometheus', () => {
  test('prometheus.yml scrapes every gateway node on its own API port, by DNS of the compose service', () => {
    const herald = prometheus.scrape_configs.find((job) => job.job_name === 'herald');
    assert.ok(herald, 'a herald job');
    assert.equal(herald.static_configs, undefined, 'not one address through the load balancer');
    const [sd] = herald.dns_sd_configs ?? [];
    assert.ok(sd, 'DNS service discovery');
    assert.equal(sd.type, 'A');
    assert.deepEqual(sd.names, ['gateway']);
    service(sd.names[0]!); // a compose service
    assert.equal(sd.port, composeGatewayConfig().server.apiPort, '/metrics is on the API port only');
    assert.equal(herald.metrics_path ?? '/metrics', '/metrics');
  });

  test('Traefik is scraped where it serves its metrics; prometheus runs with this directory and the rules', () => {
    const job = prometheus.scrape_configs.find((j) => j.job_name === 'traefik');
    const entryPoint = traefik.metrics?.prometheus?.entryPoint;
    assert.ok(entryPoint && traefik.entryPoints[entryPoint]);
    const port = traefik.entryPoints[entryPoint].address.split(':').at(-1);
    assert.deepEqual(job?.static_configs?.[0]?.targets, [`traefik:${port}`]);
    assert.equal(mountSource('prometheus', '/etc/prometheus'), './infra/prometheus');
    assert.ok(service('prometheus').command?.includes('--config.file=/etc/prometheus/prometheus.yml'));
    for (const file of prometheus.rule_files) read(join('infra/prometheus', file));
    assert.ok(service('prometheus').networks?.includes('internal'), 'on the network the gateways are on');
  });

  test('alerts.yml: what promtool checks (names, for, labels, summaries, expressions), one group', () => {
    const seen = new Set<string>();
    assert.equal(new Set(rules.groups.map((g) => g.name)).size, rules.groups.length, 'group names unique');
    for (const rule of rules.groups.flatMap((group) => group.rules)) {
      assert.ok(rule.alert && /^[A-Z][A-Za-z0-9]+$/.test(rule.alert), `an alert name: ${rule.alert}`);
      assert.ok(!seen.has(rule.alert), `${rule.alert} once`);
      seen.add(rule.alert);
      assert.ok(rule.expr.trim().length > 0, rule.alert);
      if (rule.for !== undefined) assert.match(rule.for, /^\d+(ms|s|m|h|d|w|y)$/, `${rule.alert}: for`);
      assert.ok(['critical', 'warning'].includes(rule.labels?.severity ?? ''), `${rule.alert}: severity`);
      assert.ok(rule.annotations?.summary, `${rule.alert}: summary`);
      metricNamesOf(rule.expr);
      for (const text of Object.values(rule.annotations ?? {})) {
        assert.equal(text.split('{{').length, text.split('}}').length, `${rule.alert}: balanced templates`);
      }
    }
  });

  test('alerts.yml covers node down, not ready, drops, internal errors, Redis write failures, admission, event loop lag', () => {
    const exprs = rules.groups.flatMap((group) => group.rules).map((rule) => rule.expr);
    for (const needed of [
      /up\{job="herald"\} == 0/,
      /herald_ready == 0/,
      /herald_notifications_dropped_total/,
      /herald_internal_errors_total/,
      /herald_broker_write_failures_total/,
      /herald_admission_rejected_total/,
      /nodejs_eventloop_lag_p99_seconds/,
    ]) {
      assert.ok(exprs.some((expr) => needed.test(expr)), `an alert on ${needed}`);
    }
  });
});

describe('Grafana', () => {
  const datasources = readYaml<{ datasources: Array<{ uid: string; type: string; url: string }> }>(
    'infra/grafana/provisioning/datasources/prometheus.yml',
  ).datasources;

  test('provisioning: the compose Prometheus as datasource, the dashboards directory as mounted', () => {
    assert.equal(datasources.length, 1);
    const [source] = datasources;
    assert.equal(source!.type, 'prometheus');
    const url = new URL(source!.url);
    service(url.hostname);
    assert.equal(url.port, '9090');
    const providers = readYaml<{ providers: Array<{ options: { path: string } }> }>('infra/grafana/provisioning/dashboards/herald.yml').providers;
    assert.equal(mountSource('grafana', providers[0]!.options.path), './infra/grafana/dashboards');
    assert.equal(mountSource('grafana', '/etc/grafana/provisioning'), './infra/grafana/provisioning');
  });

  test('the dashboard: unique ids, on the grid, every query on the provisioned datasource', () => {
    const ids = dashboard.panels.map((panel) => panel.id);
    assert.equal(new Set(ids).size, ids.length);
    for (const panel of dashboard.panels) {
      const { x, w } = panel.gridPos;
      assert.ok(x >= 0 && w > 0 && x + w <= 24, `${panel.title}: within the 24 columns`);
      if (panel.type === 'row') continue;
      assert.equal(panel.datasource?.uid, datasources[0]!.uid, panel.title);
      assert.ok(panel.targets && panel.targets.length > 0, `${panel.title}: a query`);
      for (const target of panel.targets) metricNamesOf(target.expr);
    }
  });

  test('the dashboard shows connections, subscriptions, emits, fan-out, latency, drops, Redis, admission, internal errors', () => {
    const exprs = dashboard.panels.flatMap((panel) => panel.targets ?? []).map((target) => target.expr).join('\n');
    for (const metric of [
      'herald_connections',
      'herald_subscriptions',
      'herald_emits_total',
      'herald_notifications_out_total',
      'herald_fanout_duration_seconds_bucket',
      'herald_notifications_dropped_total',
      'herald_broker_resyncs_total',
      'herald_broker_write_failures_total',
      'herald_redis_lean_reads',
      'herald_handshakes_in_flight',
      'herald_handshakes_queued',
      'herald_admission_rejected_total',
      'herald_internal_errors_total',
      'herald_http_responses_total',
    ]) {
      assert.ok(new RegExp(`\\b${metric}\\b`).test(exprs), metric);
    }
  });
});

test('every metric the rules and the dashboard read is one a gateway node exports', async () => {
  const exported = await exportedNames();
  const exprs = [
    ...rules.groups.flatMap((group) => group.rules).map((rule) => rule.expr),
    ...dashboard.panels.flatMap((panel) => panel.targets ?? []).map((target) => target.expr),
  ];
  for (const expr of exprs) {
    for (const name of metricNamesOf(expr)) assert.ok(exported.has(name), `${name} (in ${expr}) is exported`);
  }
});
