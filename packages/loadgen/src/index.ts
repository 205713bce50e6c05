/** What other workspace packages (the bench suite) use of wsload: its wire clients, emitter, worker pools and report types. */
export { ON_TIME_MS } from './commands/notify.ts';
export type { PerEmitFigures } from './emit-tallies.ts';
export { Emitter } from './emitter.ts';
export { registerFrame } from './frames.ts';
export { Histogram, type LatencySummary } from './histogram.ts';
export { HttpConnection, jsonPostHead } from './http-connection.ts';
export { describeMachine, machine } from './machine.ts';
export { DEFAULT_TIMEOUT_S, parseCommand, type HoldOptions } from './options.ts';
export { prepareRoster } from './prepare.ts';
export { readInto } from './receive.ts';
export { reconnectFigures, type ReconnectFigures } from './reconnect.ts';
export type { RunReport } from './report.ts';
export type { Roster } from './roster.ts';
export { attemptsFailedOf, connectingOf, type PoolSnapshot } from './snapshot.ts';
export { clientFrame, CLOSE_TIMEOUT_MS, closeFrame, Opcode, upgradeRequest, WireReader } from './wire.ts';
export { WorkerPools } from './worker-pools.ts';
