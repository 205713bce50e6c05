/**
 * Limits on JSON that the gateway takes from outside (frames, emit bodies, table rows). JSON.parse reads any depth
 * without trouble, but JSON.stringify and every recursive walk of the value (select, structuredClone, an echo in a
 * reply) overflow the stack a few thousand levels down: such a value is refused where it comes in, never met later.
 */

/** Nesting a value from outside may have: objects and arrays inside one another. */
export const MAX_JSON_DEPTH = 64;

/**
 * Whether `value` nests objects or arrays deeper than `maxDepth` (a scalar is depth 0, `{}` and `[]` depth 1).
 * Iterative, so it cannot overflow the stack on the values it exists to refuse.
 */
export function nestedDeeperThan(value: unknown, maxDepth: number = MAX_JSON_DEPTH): boolean {
  if (typeof value !== 'object' || value === null) return false;
  const stack: Array<[object, number]> = [[value, 1]];
  while (stack.length > 0) {
    const [node, depth] = stack.pop()!;
    if (depth > maxDepth) return true;
    for (const child of Array.isArray(node) ? node : Object.values(node)) {
      if (typeof child === 'object' && child !== null) stack.push([child, depth + 1]);
    }
  }
  return false;
}
