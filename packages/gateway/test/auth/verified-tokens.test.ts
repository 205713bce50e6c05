import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { VerifiedTokens } from '../../src/auth/jwt.ts';

const KEPT_MS = 1000;
const held = (tokens: VerifiedTokens<string>, names: string[], now: number): string[] =>
  names.filter((name) => tokens.get(name, now) !== undefined);

describe('VerifiedTokens', () => {
  it('keeps at most max tokens: once the newer generation holds half, the older is dropped whole', () => {
    const tokens = new VerifiedTokens<string>(4, KEPT_MS);
    const names = ['a', 'b', 'c', 'd', 'e'];
    for (const name of names) tokens.set(name, name, 0, undefined);
    // a, b filled a generation; c, d the next (a, b then older); e started a third, dropping a and b.
    assert.deepEqual(held(tokens, names, 0), ['c', 'd', 'e']);
  });

  it('holds no more than max however many distinct tokens come', () => {
    const max = 100;
    const tokens = new VerifiedTokens<string>(max, KEPT_MS);
    const names = Array.from({ length: 10 * max }, (_, i) => `token-${i}`);
    for (const name of names) tokens.set(name, name, 0, undefined);
    const kept = held(tokens, names, 0);
    assert.ok(kept.length <= max, `${kept.length} kept`);
    assert.ok(kept.includes(names.at(-1)!), 'the newest is kept');
  });

  it('answers a token only until the sooner of keptMs and its expiry', () => {
    const tokens = new VerifiedTokens<string>(4, KEPT_MS);
    tokens.set('long', 'long', 0, undefined);
    tokens.set('short', 'short', 0, 0.5); // expires 500 ms after the epoch
    assert.deepEqual(held(tokens, ['long', 'short'], 499), ['long', 'short']);
    assert.deepEqual(held(tokens, ['long', 'short'], 500), ['long']);
    assert.deepEqual(held(tokens, ['long', 'short'], KEPT_MS), []);
  });
});
