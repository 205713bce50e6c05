/**
 * Can-connect code as API Maker documents it, taken as written: an operator moving from API Maker pastes it unchanged.
 * API Maker's code reads (https://docs.apimaker.dev/v1/docs/apis-all/events/user-created-events-api.html):
 *
 *   import * as T from 'types';
 *   async function main(g: T.IAMGlobal) { ... };
 *   module.exports = main;
 *
 * Two of its forms mean nothing to Herald's runners, and are rewritten once TypeScript's types are stripped (prepare.ts):
 *  - an import of API Maker's typings modules: `types`, and `db-interfaces` (its tables' row types). Stripped of its
 *    types, the code names their bindings nowhere, and the import is blanked. A binding still named is a value
 *    (`T.EStatusCode.UNAUTHORIZED`), refused at start: there is no such module here.
 *  - CommonJS's export of main: `module.exports = main`, `module.exports.main = main` and `exports.main = main` are
 *    blanked, main being declared; with a function, or another function's name, on the right, the left side becomes
 *    `const main =`. Any other top-level assignment to `module.exports` or `exports` is refused at start.
 * Both are rewritten in place, keeping the source's length and lines (line numbers stay true), and neither is left to
 * push otherwise isolate-safe code to the sandbox (isolate-safe.ts).
 */
import type { Program } from 'acorn';
import { ConfigError } from '../errors.ts';
import { isNameSlot, isNode, type AnyNode } from './isolate-safe.ts';

export const TYPINGS_MODULES: ReadonlySet<string> = new Set(['types', 'db-interfaces']);

/** The CommonJS exports of main that Herald reads. */
const MAIN_EXPORTS = new Set(['module.exports', 'module.exports.main', 'exports.main']);

/** Source from `start` to `end` replaced by `text` (undefined: blanked), padded to the same length and lines. */
interface Edit {
  start: number;
  end: number;
  text?: string;
}

const lineOf = (node: AnyNode): number => node.loc?.start.line ?? 0;

/** `source` (the code without its types, `program` its syntax tree) with API Maker's forms rewritten. */
export function withApiMakerForms(field: string, program: Program, source: string): string {
  const edits: Edit[] = [];
  const typings = new Map<string, string>();
  const rest: AnyNode[] = [];
  for (const statement of program.body as unknown as AnyNode[]) {
    const from = typingsModule(statement);
    if (from !== undefined) {
      for (const { local } of statement.specifiers as AnyNode[]) typings.set((local as AnyNode).name as string, from);
      edits.push({ start: statement.start, end: statement.end });
      continue;
    }
    rest.push(statement);
    const edit = commonJsExport(field, statement);
    if (edit) edits.push(edit);
  }
  for (const statement of rest) {
    const used = firstRead(statement, typings);
    if (used) {
      const name = used.name as string;
      throw new ConfigError(
        `${field}: line ${lineOf(used)}: ${name}, from API Maker's '${typings.get(name)}', is used as a value; ` +
          'its types are stripped, but Herald has no such module',
      );
    }
  }
  return applied(source, edits);
}

function typingsModule(statement: AnyNode): string | undefined {
  if (statement.type !== 'ImportDeclaration') return undefined;
  const from = (statement.source as AnyNode).value;
  return typeof from === 'string' && TYPINGS_MODULES.has(from) ? from : undefined;
}

/** `module.exports.main` as its names; undefined for anything but identifiers and plain property names. */
function chainOf(target: unknown): string[] | undefined {
  if (!isNode(target)) return undefined;
  if (target.type === 'Identifier') return [target.name as string];
  if (target.type !== 'MemberExpression' || target.computed) return undefined;
  const object = chainOf(target.object);
  return object && [...object, (target.property as AnyNode).name as string];
}

/** The edit for a top-level CommonJS export, if `statement` is one. */
function commonJsExport(field: string, statement: AnyNode): Edit | undefined {
  const assignment = statement.type === 'ExpressionStatement' ? (statement.expression as AnyNode) : undefined;
  if (assignment?.type !== 'AssignmentExpression') return undefined;
  const chain = chainOf(assignment.left);
  if (chain === undefined || (chain[0] !== 'module' && chain[0] !== 'exports') || chain.length === 1) return undefined;
  const where = `${field}: line ${lineOf(statement)}`;
  if (assignment.operator !== '=' || !MAIN_EXPORTS.has(chain.join('.'))) {
    throw new ConfigError(`${where}: ${chain.join('.')} is not an export Herald reads: export main (module.exports = main)`);
  }
  const value = assignment.right as AnyNode;
  if (value.type === 'Identifier' && value.name === 'main') return { start: statement.start, end: statement.end };
  if (value.type === 'Identifier' || value.type === 'FunctionExpression' || value.type === 'ArrowFunctionExpression') {
    return { start: statement.start, end: value.start, text: 'const main =' };
  }
  throw new ConfigError(`${where}: ${chain.join('.')} must be main, a function, or a function's name`);
}

/** The first identifier under `node` that reads one of `names`. */
function firstRead(node: AnyNode, names: ReadonlyMap<string, string>): AnyNode | undefined {
  for (const [key, child] of Object.entries(node)) {
    for (const item of Array.isArray(child) ? child : [child]) {
      if (!isNode(item)) continue;
      const found = item.type === 'Identifier' ? (names.has(item.name as string) && !isNameSlot(node, key) ? item : undefined) : firstRead(item, names);
      if (found) return found;
    }
  }
  return undefined;
}

function applied(source: string, edits: readonly Edit[]): string {
  let result = '';
  let at = 0;
  for (const { start, end, text } of edits) {
    const original = source.slice(start, end);
    const lines = original.split('\n').length - 1;
    const filled = text === undefined ? original.replace(/[^\n]/g, ' ') : text + ' '.repeat(original.length - text.length - lines) + '\n'.repeat(lines);
    result += source.slice(at, start) + filled;
    at = end;
  }
  return result + source.slice(at);
}
