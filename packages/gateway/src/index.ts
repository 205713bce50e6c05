export { Gateway, type GatewayDeps } from './node.ts';
export { loadConfigFile, parseConfig, DEFAULT_CONFIG_FILE, type ConfigOverrides } from './config/load.ts';
export type { Config } from './config/schema.ts';
export type { Broker, DeliveryHandler } from './broker/broker.ts';
export { MemoryBus } from './broker/memory.ts';
export type { DataSource, Row, Filter } from './data/data-source.ts';
export { MemoryDataSource } from './data/memory.ts';
export type { Authenticator, ApiUser, Person } from './auth/authenticator.ts';
export { GatewayError, ConfigError } from './errors.ts';
