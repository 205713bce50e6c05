export { HeraldClient, HeraldError, type ConnectOptions, type Notification, type OnEventInput } from './client.ts';
