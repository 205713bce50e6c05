/** Test support: real gateway nodes on port 0, real token requests, real WebSocket clients. */
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { once } from 'node:events';
import { parse as parseYaml } from 'yaml';
import WebSocket from 'ws';
import type { ServerFrame } from '@herald/protocol';
import { DEFAULT_CONFIG_FILE, parseConfig } from '../../src/config/load.ts';
import type { Config } from '../../src/config/schema.ts';
import { Gateway, type GatewayDeps } from '../../src/node.ts';

export type RawConfig = Record<string, any>;

/**
 * The shipped default config as a plain object, on a free loopback port, for a test to adjust; the files it
 * names (seeds, code) are made absolute, so a test may write it anywhere.
 */
export function defaultRawConfig(): RawConfig {
  const raw = parseYaml(readFileSync(DEFAULT_CONFIG_FILE, 'utf8')) as RawConfig;
  raw.server = { port: 0, host: '127.0.0.1' };
  const absolute = (path: string) => resolve(dirname(DEFAULT_CONFIG_FILE), path);
  const customers = raw.instances.mongodb.databases.am_bench.collections.customers;
  customers.seed = absolute(customers.seed);
  for (const event of Object.values<RawConfig>(raw.events)) {
    if (event.canConnect?.file) event.canConnect.file = absolute(event.canConnect.file);
  }
  return raw;
}

export interface TestNode {
  gateway: Gateway;
  config: Readonly<Config>;
  http: string;
  ws: string;
  close(): Promise<void>;
}

export async function startNode(adjust: (raw: RawConfig) => void = () => {}, deps: GatewayDeps = {}): Promise<TestNode> {
  const raw = defaultRawConfig();
  adjust(raw);
  const config = parseConfig(raw, dirname(DEFAULT_CONFIG_FILE));
  const gateway = await Gateway.create(config, deps);
  const port = await gateway.listen();
  return { gateway, config, http: `http://127.0.0.1:${port}`, ws: `ws://127.0.0.1:${port}`, close: () => gateway.close() };
}

export interface HttpReply {
  status: number;
  body: any;
}

export async function post(url: string, body: unknown, headers: Record<string, string> = {}): Promise<HttpReply> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: response.status, body: await response.json() };
}

/** Where HTTP calls go: a node, or the load balancer in front of a fleet. */
export type HttpTarget = Pick<TestNode, 'http'>;

export async function apiToken(node: HttpTarget, u = 'bench', p = 'bench'): Promise<string> {
  const reply = await post(`${node.http}/api/system-api/bench/token`, { authTokenType: 'AM', authTokenAM: { u, p } });
  if (reply.status !== 200) throw new Error(`API token refused: ${JSON.stringify(reply.body)}`);
  return reply.body.data.token;
}

/** The person token of a customer of the default data set, e.g. personToken(node, 'NICK', 'WAHLBERG'). */
export async function personToken(node: HttpTarget, u: string, p: string): Promise<string> {
  const body = { authTokenType: 'AM_DB', authTokenAMDB: { generator: 'customers', u, p } };
  const reply = await post(`${node.http}/api/system-api/bench/token`, body);
  if (reply.status !== 200) throw new Error(`person token refused: ${JSON.stringify(reply.body)}`);
  return reply.body.data.token;
}

export async function emit(node: HttpTarget, token: string, name: string, eventData: unknown): Promise<HttpReply> {
  return post(`${node.http}/api/system-api/bench/emit-event-ws`, { name, eventData }, { 'x-am-authorization': token });
}

export interface TableReply {
  status: number;
  headers: Headers;
  body: { data?: any; statusCode?: number; errors?: Array<{ code: string; message: string }> };
}

/**
 * A table API call on `mongodb/am_bench/<path>` (a collection, then `/save-single-or-multiple` or `?query`): the
 * tokens given as headers, `body` as JSON unless it is a string.
 */
export async function tableCall(
  node: HttpTarget,
  method: 'GET' | 'POST',
  path: string,
  tokens: { api?: string | undefined; person?: string | undefined } = {},
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<TableReply> {
  const sent: Record<string, string> = { 'content-type': 'application/json', ...headers };
  if (tokens.api) sent['x-am-authorization'] = tokens.api;
  if (tokens.person) sent['x-am-user-authorization'] = tokens.person;
  const payload = body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) };
  const response = await fetch(`${node.http}/api/schema/bench/mongodb/am_bench/${path}`, { method, headers: sent, ...payload });
  return { status: response.status, headers: response.headers, body: (await response.json()) as TableReply['body'] };
}

/** The path of a table's save route, for tableCall. */
export const saveTo = (collection: string): string => `${collection}/save-single-or-multiple`;

/** A REGISTER entry for a table's saved rows (INSTANCES). */
export function inserts(collection: string, extra: object = {}): object {
  return { eventType: 'INSTANCES', apiName: 'SCHEMA_POST_BULK_INSERT', instance: 'mongodb', database: 'am_bench', collection, getEventData: true, ...extra };
}

/** A WebSocket client that queues every frame, so a test can await the next one of a type. */
export class TestSocket {
  readonly socket: WebSocket;
  readonly frames: ServerFrame[] = [];
  readonly closed: Promise<{ code: number; reason: string }>;
  #waiters: Array<() => void> = [];

  constructor(socket: WebSocket) {
    this.socket = socket;
    socket.on('message', (data) => {
      this.frames.push(JSON.parse(String(data)) as ServerFrame);
      for (const wake of this.#waiters.splice(0)) wake();
    });
    this.closed = once(socket, 'close').then(([code, reason]) => {
      for (const wake of this.#waiters.splice(0)) wake();
      return { code: code as number, reason: String(reason) };
    });
  }

  /** Open a socket with the given tokens (no CONNECTED awaited: use `next('CONNECTED')`). */
  static open(node: TestNode, apiToken?: string, personToken?: string, options: WebSocket.ClientOptions = {}): TestSocket {
    const url = new URL(node.ws);
    if (apiToken !== undefined) url.searchParams.set('x-am-authorization', apiToken);
    if (personToken !== undefined) url.searchParams.set('x-am-user-authorization', personToken);
    return new TestSocket(new WebSocket(url, options));
  }

  /** Open and await CONNECTED. */
  static async connect(node: TestNode, apiToken: string, personToken?: string): Promise<TestSocket> {
    const client = TestSocket.open(node, apiToken, personToken);
    await client.next('CONNECTED');
    return client;
  }

  send(frame: unknown): void {
    this.socket.send(typeof frame === 'string' ? frame : JSON.stringify(frame));
  }

  /** Take the oldest unread frame of `type` (any type if omitted); fails after `timeoutMs`. */
  async next<T extends ServerFrame['type']>(type?: T, timeoutMs = 3000): Promise<Extract<ServerFrame, { type: T }>> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const index = this.frames.findIndex((frame) => type === undefined || frame.type === type);
      if (index >= 0) return this.frames.splice(index, 1)[0] as Extract<ServerFrame, { type: T }>;
      const left = deadline - Date.now();
      if (left <= 0 || this.socket.readyState === WebSocket.CLOSED) {
        throw new Error(`no ${type ?? 'frame'} within ${timeoutMs} ms; unread: ${JSON.stringify(this.frames)}`);
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.#waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  /** REGISTER and await the reply. */
  async register(...onEvents: unknown[]) {
    this.send({ objType: 'REGISTER', onEvents });
    return (await this.next('REGISTER')).response;
  }

  async close(): Promise<void> {
    if (this.socket.readyState !== WebSocket.CLOSED) this.socket.close();
    await this.closed;
  }
}

/** A REGISTER entry for an event, with optional criteria. */
export function onEvent(apiName: string, criteria?: Record<string, unknown>, extra: object = {}): object {
  const condition = criteria ? { condition: { conditionType: 'RESPONSE', criteria } } : {};
  return { eventType: 'CUSTOM_WS_EVENTS', apiName, getEventData: true, ...condition, ...extra };
}

/** The value of one sample of a prometheus metric (0 when absent). */
export async function metric(node: TestNode, name: string, labels: Record<string, string> = {}): Promise<number> {
  const { values } = await node.gateway.metrics.registry.getSingleMetric(name)!.get();
  const sample = values.find((v) => Object.entries(labels).every(([key, value]) => String(v.labels[key]) === value));
  return sample?.value ?? 0;
}

/** The number of observations of a histogram without labels. */
export async function sampleCount(node: TestNode, name: string): Promise<number> {
  const { values } = await node.gateway.metrics.registry.getSingleMetric(name)!.get();
  // prom-client names a histogram's samples (metricName) without listing the field in its types.
  return values.find((v) => (v as { metricName?: string }).metricName === `${name}_count`)?.value ?? 0;
}
