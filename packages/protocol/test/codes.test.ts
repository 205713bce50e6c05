/** The code catalogue: each code once, in the range that tells a client whether to reconnect, and documented. */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { CLOSE_CODE_RANGES, CloseCode, ErrorCode, shouldReconnect, StandardCloseCode } from '../src/index.ts';

const PROTOCOL_MD = readFileSync(new URL('../../../docs/protocol.md', import.meta.url), 'utf8');

/** The rows of the markdown table under `heading`, each cell trimmed (the header and its rule left out). */
function tableUnder(heading: string): string[][] {
  const section = PROTOCOL_MD.slice(PROTOCOL_MD.indexOf(`\n${heading}\n`));
  const lines = section.split('\n').slice(1);
  const start = lines.findIndex((line) => line.startsWith('|'));
  const rows: string[][] = [];
  for (const line of lines.slice(start + 2)) {
    if (!line.startsWith('|')) break;
    rows.push(line.split('|').slice(1, -1).map((cell) => cell.trim()));
  }
  return rows;
}

const rangeOf = (code: number): keyof typeof CLOSE_CODE_RANGES | undefined =>
  (Object.keys(CLOSE_CODE_RANGES) as Array<keyof typeof CLOSE_CODE_RANGES>).find(
    (name) => code >= CLOSE_CODE_RANGES[name].from && code <= CLOSE_CODE_RANGES[name].to,
  );

test('close codes: each sent code is unique and in a range; reconnect is what its range says', () => {
  const codes = Object.values(CloseCode);
  assert.equal(new Set(codes).size, codes.length);
  for (const code of codes) {
    const range = rangeOf(code);
    assert.ok(range, `${code} is in no documented range`);
    assert.equal(shouldReconnect(code), CLOSE_CODE_RANGES[range].reconnect, String(code));
  }
  assert.equal(shouldReconnect(4499), true);
  assert.equal(shouldReconnect(4500), false);
  assert.equal(shouldReconnect(4999), false);
  assert.equal(shouldReconnect(StandardCloseCode.ABNORMAL_CLOSURE), true);
});

test('close codes: the ranges do not overlap, and ours stay out of the standard one', () => {
  const ranges = Object.values(CLOSE_CODE_RANGES).toSorted((a, b) => a.from - b.from);
  for (let i = 1; i < ranges.length; i++) assert.ok(ranges[i]!.from > ranges[i - 1]!.to);
  for (const [name, code] of Object.entries(CloseCode)) {
    if (rangeOf(code) === 'standard') assert.equal(StandardCloseCode[name as keyof typeof StandardCloseCode], code, name);
    else assert.ok(!(Object.values(StandardCloseCode) as number[]).includes(code), name);
  }
  const standard = Object.values(StandardCloseCode);
  assert.equal(new Set(standard).size, standard.length);
  for (const code of standard) assert.equal(rangeOf(code), 'standard', String(code));
});

test('close codes: docs/protocol.md section 7 lists every code the node sends, by its name', () => {
  const documented = new Map(tableUnder('## 7. Close codes').map(([code, name]) => [Number(code), name]));
  for (const [name, code] of Object.entries(CloseCode)) assert.equal(documented.get(code), `\`${name}\``, `${code} ${name}`);
});

test('error codes: each is its own name, once, and documented in docs/protocol.md section 8', () => {
  const codes = Object.entries(ErrorCode);
  for (const [name, code] of codes) assert.equal(code, name);
  assert.equal(new Set(Object.values(ErrorCode)).size, codes.length);
  const documented = new Set(tableUnder('## 8. Error codes').map(([code]) => code));
  for (const [name] of codes) assert.ok(documented.has(`\`${name}\``), `${name} is not in docs/protocol.md section 8`);
});
