/**
 * The fleet's status: each node writes its status record through the broker every status.intervalMs (a hash field in
 * Redis, removed with the node's lease), and any node answers the whole fleet's from those records, without asking
 * the other nodes anything: a node that does not answer cannot hold the page up, and shows as gone once its lease
 * runs out.
 */
import type { Broker } from '../broker/broker.ts';
import type { StatusRecord, StatusSampler } from './record.ts';

export interface FleetView {
  /** When this view was read, ms since the epoch. */
  at: number;
  /** The node that answered. */
  answeredBy: string;
  nodes: StatusRecord[];
  totals: { nodes: number; ready: number; connections: number; subscriptions: number; emitsPerSecond: number; notificationsPerSecond: number };
  /** Records that could not be read (written by a node of another version?): left out. */
  unreadable: number;
}

export interface FleetStatusOptions {
  broker: Broker;
  sampler: StatusSampler;
  intervalMs: number;
}

export class FleetStatus {
  readonly #options: FleetStatusOptions;
  #timer: NodeJS.Timeout | undefined;

  constructor(options: FleetStatusOptions) {
    this.#options = options;
  }

  /** Write a first record at once (the page shows the node from its start), then every interval. */
  start(): void {
    this.#timer = setInterval(() => void this.#publish(), this.#options.intervalMs);
    this.#timer.unref();
    void this.#publish();
  }

  stop(): void {
    clearInterval(this.#timer);
  }

  /** Every live node's last record; rejects with UNAVAILABLE when the broker cannot be reached. */
  async read(): Promise<FleetView> {
    const { broker } = this.#options;
    const records = await broker.fleetStatus();
    const nodes: StatusRecord[] = [];
    for (const text of records.values()) {
      const record = parse(text);
      if (record !== undefined) nodes.push(record);
    }
    nodes.sort((a, b) => a.nodeId.localeCompare(b.nodeId));
    const sum = (pick: (record: StatusRecord) => number) => Math.round(nodes.reduce((total, record) => total + pick(record), 0) * 100) / 100;
    const totals = {
      nodes: nodes.length,
      ready: nodes.filter((record) => record.ready).length,
      connections: sum((record) => record.connections),
      subscriptions: sum((record) => record.subscriptions),
      emitsPerSecond: sum((record) => record.emitsPerSecond),
      notificationsPerSecond: sum((record) => record.notificationsPerSecond),
    };
    return { at: Date.now(), answeredBy: broker.nodeId, nodes, totals, unreadable: records.size - nodes.length };
  }

  async #publish(): Promise<void> {
    const record = await this.#options.sampler.sample();
    // Redis away: the next interval writes a fresh one ("Redis lost" is logged once, by the broker's observer).
    await this.#options.broker.putStatus(JSON.stringify(record)).catch(() => {});
  }
}

function parse(text: string): StatusRecord | undefined {
  try {
    const record = JSON.parse(text) as Partial<StatusRecord> | null;
    return typeof record?.nodeId === 'string' && typeof record.connections === 'number' ? (record as StatusRecord) : undefined;
  } catch {
    return undefined;
  }
}
