/** What a node's id may hold, below both the config that checks it and the broker that relies on it. */

/** Joins the ids of a route's nodes in the route's Redis field (broker/redis/routes.ts): no node id may contain it. */
export const NODE_ID_SEPARATOR = ',';
