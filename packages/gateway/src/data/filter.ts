/**
 * The filter language every DataSource speaks: field equality (an array field also matches a value it holds),
 * `{ $eq: v }`, `{ $in: [...] }`, and `$and` of filters. Each DataSource checks a filter here before it runs
 * it, so a caller gets the same answer whatever the instance is, and nothing else ($where, $regex, ...) ever
 * reaches MongoDB, whoever wrote the filter (a public table's caller, a token request, can-connect code).
 */
import { isRecord } from '@herald/protocol';
import { GatewayError } from '../errors.ts';
import type { Filter } from './data-source.ts';

const FIELD_OPERATORS = new Set(['$eq', '$in']);

const unsupported = (path: string, operator: string) =>
  new GatewayError('BAD_REQUEST', `${path}: operator ${operator} is not supported (equality, $eq, $in, $and are)`);

/** Throws BAD_REQUEST naming the first part of `filter` outside the language. */
export function checkFilter(filter: Filter, path = 'find'): void {
  for (const [key, condition] of Object.entries(filter)) {
    if (key === '$and') {
      if (!Array.isArray(condition) || !condition.every(isRecord)) {
        throw new GatewayError('BAD_REQUEST', `${path}.$and must be an array of filters`);
      }
      condition.forEach((part, i) => checkFilter(part as Filter, `${path}.$and[${i}]`));
    } else if (key.startsWith('$')) {
      throw unsupported(path, key);
    } else if (isRecord(condition) && Object.keys(condition).some((operator) => operator.startsWith('$'))) {
      for (const [operator, operand] of Object.entries(condition)) {
        if (!FIELD_OPERATORS.has(operator)) throw unsupported(`${path}.${key}`, operator);
        if (operator === '$in' && !Array.isArray(operand)) throw new GatewayError('BAD_REQUEST', `${path}.${key}.$in needs an array`);
      }
    }
  }
}
