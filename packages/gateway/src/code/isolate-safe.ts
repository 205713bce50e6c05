/**
 * Is this code isolate-safe? Isolate-safe code runs in an isolate: a bare V8 heap with no Node APIs, where each version
 * of the code is compiled once per isolate and its `main` called many times. So isolate-safe code must only
 * read what it is handed and call g.sys, and must keep nothing between calls.
 *
 * THE RULE. Code is isolate-safe when all of these hold (checked on the syntax tree, never by running it):
 *  1. no module syntax: no `import` or `export` declaration, no `import(...)`, no `import.meta`;
 *  2. its top level holds only function declarations, empty statements, the directive "use strict", and `const`
 *     bindings each set to a primitive literal (not a RegExp, which keeps lastIndex), a template without
 *     substitutions, a negated number, a function or arrow expression, or the name of a top-level function
 *     (`const main = check`, as API Maker's `module.exports = check` becomes): nothing runs at load, and
 *     there is no top-level value that a call could change for the next one;
 *  3. every identifier it reads is either declared somewhere in the code (functions, parameters,
 *     variables, classes, catch bindings) or one of ECMASCRIPT_GLOBALS below. `console`, `fetch`,
 *     `Buffer`, `structuredClone`, `TextEncoder`, `URL` and every other host API are not: they do not
 *     exist in an isolate;
 *  4. no name of HOST_NAMES appears as an identifier anywhere, even declared by the code, so a
 *     declaration elsewhere cannot mask a use (timers, `process`, `require`, `globalThis`, `eval`,
 *     `Function`, ...);
 *  5. it assigns to, updates or deletes no property of a standard global (`Math.x = 1`,
 *     `Array.prototype.f = ...`): such a change would outlive the call.
 *
 * Conservative: code that fails any point goes to the sandbox, where it behaves as in plain Node.
 * Reading the clock (`Date`, `Date.now()`) and `Math.random()` are allowed: they read, they keep nothing.
 * Declared names are collected without scopes (rule 3 accepts a name declared in another function): such
 * code fails with a ReferenceError in the isolate, a visible `threw`, never a silent difference.
 * Rule 5 cannot see a change made through a call (`Object.assign(Math, ...)`); each code version runs in
 * its own context in each isolate, so such a change can reach only later calls of the same code.
 */
import type { Node, Program } from 'acorn';

const ECMASCRIPT_GLOBALS = new Set([
  'undefined', 'NaN', 'Infinity', 'Object', 'Array', 'String', 'Number', 'Boolean', 'Symbol', 'BigInt',
  'Math', 'JSON', 'Date', 'RegExp', 'Map', 'Set', 'WeakMap', 'WeakSet', 'WeakRef', 'Promise', 'Reflect', 'Proxy',
  'Error', 'TypeError', 'RangeError', 'SyntaxError', 'ReferenceError', 'EvalError', 'URIError', 'AggregateError',
  'parseInt', 'parseFloat', 'isNaN', 'isFinite', 'encodeURIComponent', 'decodeURIComponent', 'encodeURI', 'decodeURI',
  'ArrayBuffer', 'DataView', 'Int8Array', 'Uint8Array', 'Uint8ClampedArray', 'Int16Array', 'Uint16Array',
  'Int32Array', 'Uint32Array', 'Float32Array', 'Float64Array', 'BigInt64Array', 'BigUint64Array', 'Intl',
]);

const HOST_NAMES = new Set([
  'require', 'module', 'exports', 'process', 'globalThis', 'global', 'self', 'window', 'eval', 'Function',
  'setTimeout', 'setInterval', 'setImmediate', 'queueMicrotask', 'clearTimeout', 'clearInterval', 'clearImmediate',
  'WebAssembly', 'SharedArrayBuffer', 'Atomics', '__dirname', '__filename',
]);

export type AnyNode = Node & Record<string, unknown>;

export const isNode = (value: unknown): value is AnyNode =>
  typeof value === 'object' && value !== null && typeof (value as { type?: unknown }).type === 'string';

export const FUNCTION_TYPES: ReadonlySet<string> = new Set(['FunctionDeclaration', 'FunctionExpression', 'ArrowFunctionExpression']);

const lineOf = (node: Node): number => node.loc?.start.line ?? 0;

/** Children that name something rather than read a binding: `a.b`'s b, `{ b: 1 }`'s b, labels. */
export function isNameSlot(parent: AnyNode, key: string): boolean {
  switch (parent.type) {
    case 'MemberExpression':
      return key === 'property' && !parent.computed;
    case 'Property':
    case 'MethodDefinition':
    case 'PropertyDefinition':
      return key === 'key' && !parent.computed;
    case 'LabeledStatement':
    case 'BreakStatement':
    case 'ContinueStatement':
      return key === 'label';
    case 'MetaProperty':
    case 'ImportSpecifier':
    case 'ExportSpecifier':
      return true;
    default:
      return false;
  }
}

/** The names a binding pattern declares: `x`, `{ a, b: [c] }`, `...rest`, `d = 1`. */
export function boundNames(pattern: unknown, into: string[] = []): string[] {
  if (!isNode(pattern)) return into;
  switch (pattern.type) {
    case 'Identifier':
      into.push(pattern.name as string);
      break;
    case 'ObjectPattern':
      for (const p of pattern.properties as AnyNode[]) boundNames(p.type === 'RestElement' ? p.argument : p.value, into);
      break;
    case 'ArrayPattern':
      for (const element of pattern.elements as unknown[]) boundNames(element, into);
      break;
    case 'AssignmentPattern':
      boundNames(pattern.left, into);
      break;
    case 'RestElement':
      boundNames(pattern.argument, into);
      break;
  }
  return into;
}

function declaredBy(node: AnyNode): string[] {
  switch (node.type) {
    case 'VariableDeclarator':
      return boundNames(node.id);
    case 'FunctionDeclaration':
    case 'FunctionExpression':
    case 'ArrowFunctionExpression':
      return [...boundNames(node.id), ...(node.params as unknown[]).flatMap((param) => boundNames(param))];
    case 'ClassDeclaration':
    case 'ClassExpression':
      return boundNames(node.id);
    case 'CatchClause':
      return boundNames(node.param);
    case 'ImportSpecifier':
    case 'ImportDefaultSpecifier':
    case 'ImportNamespaceSpecifier':
      return boundNames(node.local);
    default:
      return [];
  }
}

const MODULE_SYNTAX = new Set([
  'ImportDeclaration', 'ImportExpression', 'ExportNamedDeclaration', 'ExportDefaultDeclaration', 'ExportAllDeclaration',
]);

/** The root identifier of `a.b.c`, if the target is a member expression. */
function memberRoot(target: unknown): AnyNode | undefined {
  let node = target;
  while (isNode(node) && node.type === 'MemberExpression') node = node.object;
  return isNode(node) && node.type === 'Identifier' && node !== target ? node : undefined;
}

function mutatedTarget(node: AnyNode): unknown {
  if (node.type === 'AssignmentExpression') return node.left;
  if (node.type === 'UpdateExpression') return node.argument;
  if (node.type === 'UnaryExpression' && node.operator === 'delete') return node.argument;
  return undefined;
}

interface Scan {
  declared: Set<string>;
  reads: AnyNode[];
  reasons: string[];
  mutatedRoots: AnyNode[];
}

function scan(node: AnyNode, found: Scan): void {
  for (const name of declaredBy(node)) found.declared.add(name);
  if (MODULE_SYNTAX.has(node.type)) found.reasons.push(`line ${lineOf(node)}: module syntax (import or export)`);
  if (node.type === 'MetaProperty') found.reasons.push(`line ${lineOf(node)}: import.meta`);
  const root = memberRoot(mutatedTarget(node));
  if (root) found.mutatedRoots.push(root);
  for (const [key, child] of Object.entries(node)) {
    for (const item of Array.isArray(child) ? child : [child]) {
      if (!isNode(item)) continue;
      if (item.type === 'Identifier') {
        if (!isNameSlot(node, key)) found.reads.push(item);
      } else {
        scan(item, found);
      }
    }
  }
}

function isInertInitializer(init: unknown, functions: ReadonlySet<string>): boolean {
  if (!isNode(init)) return false;
  switch (init.type) {
    case 'Identifier':
      return functions.has(init.name as string);
    case 'Literal':
      return !(init.value instanceof RegExp) && !('regex' in init);
    case 'TemplateLiteral':
      return (init.expressions as unknown[]).length === 0;
    case 'UnaryExpression':
      return init.operator === '-' && isNode(init.argument) && init.argument.type === 'Literal' && typeof init.argument.value === 'number';
    case 'FunctionExpression':
    case 'ArrowFunctionExpression':
      return true;
    default:
      return false;
  }
}

function topLevelReasons(program: Program): string[] {
  const reasons: string[] = [];
  const statements = program.body as unknown as AnyNode[];
  const functions = new Set(statements.filter((statement) => statement.type === 'FunctionDeclaration').flatMap((statement) => boundNames(statement.id)));
  for (const statement of statements) {
    // An empty statement (`function main() {};`, as API Maker's examples end main) does nothing.
    if (statement.type === 'FunctionDeclaration' || statement.type === 'EmptyStatement') continue;
    if (statement.type === 'ExpressionStatement' && typeof statement.directive === 'string') continue;
    if (MODULE_SYNTAX.has(statement.type)) continue; // reported by scan
    if (
      statement.type === 'VariableDeclaration' &&
      statement.kind === 'const' &&
      (statement.declarations as AnyNode[]).every((declarator) => isInertInitializer(declarator.init, functions))
    ) {
      continue;
    }
    reasons.push(`line ${lineOf(statement)}: top-level ${statement.type} (runs at load or keeps state between calls)`);
  }
  return reasons;
}

/** Why `program` is not isolate-safe, in source order of discovery; empty when it is isolate-safe. */
export function whyNotIsolateSafe(program: Program): string[] {
  // `arguments` is declared by every non-arrow function.
  const found: Scan = { declared: new Set(['arguments']), reads: [], reasons: [], mutatedRoots: [] };
  scan(program as unknown as AnyNode, found);
  const reasons = [...found.reasons, ...topLevelReasons(program)];
  const report = (node: AnyNode, why: string): void => {
    reasons.push(`line ${lineOf(node)}: ${why}`);
  };
  // Binding identifiers are among the reads too, so rule 4 also catches `const process = ...`.
  for (const identifier of found.reads) {
    const name = identifier.name as string;
    if (HOST_NAMES.has(name)) report(identifier, `uses ${name}`);
    else if (!found.declared.has(name) && !ECMASCRIPT_GLOBALS.has(name)) report(identifier, `uses ${name}, which an isolate does not have`);
  }
  for (const root of found.mutatedRoots) {
    const name = root.name as string;
    if (ECMASCRIPT_GLOBALS.has(name) && !found.declared.has(name)) report(root, `changes the built-in ${name}`);
  }
  return [...new Set(reasons)];
}
