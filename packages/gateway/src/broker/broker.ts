/**
 * The Broker owns everything that crosses nodes: which node holds which route, and carrying an emit to
 * those nodes. The hub tells it when a route first appears on this node and when it last leaves, never
 * once per client; an emit is published once per node that holds a matching route, never once per client.
 */
import type { Route } from '../events/routing.ts';

/** Called on the receiving node for every emit that matched one of its routes. Must not mutate eventData. */
export type DeliveryHandler = (event: string, eventData: Record<string, unknown>) => void;

export interface Broker {
  /** This node's id in the fleet. */
  readonly nodeId: string;
  /** Start receiving emits for this node. */
  start(onDelivery: DeliveryHandler): Promise<void>;
  /** The first local subscriber on `route` appeared. */
  addRoute(route: Route): Promise<void>;
  /** The last local subscriber on `route` left. */
  removeRoute(route: Route): Promise<void>;
  /**
   * Carry an emit to every node holding a route it matches; answers how many nodes it was published to.
   * The handler may run before or after the promise settles.
   */
  publish(event: string, eventData: Record<string, unknown>): Promise<number>;
  /** Stop receiving, and forget this node's routes. */
  close(): Promise<void>;
}
