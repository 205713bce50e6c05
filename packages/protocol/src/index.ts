export * from './codes.ts';
export * from './messages.ts';
export * from './parse.ts';
export * from './encode.ts';
export * from './limits.ts';
export * from './http.ts';
