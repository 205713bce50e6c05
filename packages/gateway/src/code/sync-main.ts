/**
 * `async function main(g) { ... }` that never awaits runs as a plain function: the same statements, in the same
 * order, and outcomeOf accepts a value or a promise alike. Its answer is then known when the call returns, so an
 * isolate answers a whole batch in one entry instead of two (the second would only read what the microtasks
 * settled). The source keeps its length and lines: the keyword is blanked, not cut.
 *
 * Done only when nothing could tell: main's own body has no `await` (nested functions may), and `main` is
 * named nowhere but in its declaration, so no caller expects the promise.
 */
import type { Program } from 'acorn';
import { FUNCTION_TYPES, isNode, type AnyNode } from './isolate-safe.ts';

function children(node: AnyNode): AnyNode[] {
  return Object.values(node).flatMap((child) => (Array.isArray(child) ? child : [child])).filter(isNode);
}

/** Every Identifier named `name`, anywhere. */
function namedCount(node: AnyNode, name: string): number {
  const own = node.type === 'Identifier' && node.name === name ? 1 : 0;
  return own + children(node).reduce((sum, child) => sum + namedCount(child, name), 0);
}

/** An await (or for await) in this function's own body, not in functions nested in it. */
function awaits(node: AnyNode): boolean {
  if (node.type === 'AwaitExpression' || (node.type === 'ForOfStatement' && node.await === true)) return true;
  return children(node).some((child) => !FUNCTION_TYPES.has(child.type) && awaits(child));
}

/**
 * `source` with the `async` of `main` (its function, as prepare.ts's findMain found it) blanked where that
 * changes nothing anyone can see; otherwise `source` itself.
 */
export function withoutNeedlessAsync(program: Program, source: string, main: AnyNode | undefined): string {
  if (!main?.async || main.generator || awaits(main.body as AnyNode)) return source;
  if (namedCount(program as unknown as AnyNode, 'main') !== 1) return source;
  if (source.slice(main.start, main.start + 5) !== 'async') return source;
  return `${source.slice(0, main.start)}     ${source.slice(main.start + 5)}`;
}
