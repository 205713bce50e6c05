/** Person passwords: the scrypt hash format, its checks, and the bound on checks at once. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DECOY_HASH, DEFAULT_COST, PasswordChecks, costOf, hashPassword } from '../../src/auth/password.ts';
import { ConfigError, GatewayError } from '../../src/errors.ts';

const CHEAP = { ln: 10, r: 8, p: 1 };

describe('password hashes', () => {
  it('are self-describing PHC strings, salted: one password hashes differently each time', async () => {
    const [a, b] = await Promise.all([hashPassword('WAHLBERG', CHEAP), hashPassword('WAHLBERG', CHEAP)]);
    assert.match(a, /^\$scrypt\$ln=10,r=8,p=1\$[A-Za-z0-9+/]{22}\$[A-Za-z0-9+/]{43}$/);
    assert.notEqual(a, b);
    assert.match(DECOY_HASH, new RegExp(`^\\$scrypt\\$ln=${DEFAULT_COST.ln},r=${DEFAULT_COST.r},p=${DEFAULT_COST.p}\\$`));
  });

  it('check the right password ok, any other wrong, and text that is no hash not_hashed', async () => {
    const checks = new PasswordChecks(2, 8);
    const stored = await hashPassword('WAHLBERG', CHEAP);
    assert.equal(await checks.check('WAHLBERG', stored, stored), 'ok');
    for (const wrong of ['wahlberg', 'WAHLBERG ', '', stored]) assert.equal(await checks.check(wrong, stored, stored), 'wrong');
    for (const notHashed of ['WAHLBERG', undefined, 42, null, stored.replace('ln=10', 'ln=25'), stored.replace('$scrypt$', '$argon2id$')]) {
      assert.equal(await checks.check('WAHLBERG', notHashed, stored), 'not_hashed', String(notHashed));
    }
  });

  it('treat a password as its NFC form, so one typed with combining marks matches', async () => {
    const checks = new PasswordChecks(1, 0);
    const stored = await hashPassword('Zoë', CHEAP);
    assert.equal(await checks.check('Zoe\u0308', stored, stored), 'ok');
  });

  it('past the checks at once and the queue, a login is refused UNAVAILABLE with a Retry-After, and the rest still finish', async () => {
    const checks = new PasswordChecks(1, 2);
    const stored = await hashPassword('x', { ln: 12, r: 8, p: 1 });
    const pending = Array.from({ length: 4 }, () => checks.check('x', stored, stored).catch((error: unknown) => error));
    const results = await Promise.all(pending);
    assert.deepEqual(results.slice(0, 3), ['ok', 'ok', 'ok']);
    const refused = results[3];
    assert.ok(refused instanceof GatewayError && refused.code === 'UNAVAILABLE' && refused.retryAfterS === 1, String(refused));
    assert.equal(await checks.check('x', stored, stored), 'ok');
  });

  it('take a cost written as in a hash, and refuse one a node would not check', () => {
    assert.deepEqual(costOf('ln=17,r=8,p=1'), { ln: 17, r: 8, p: 1 });
    for (const bad of ['17,8,1', 'ln=18,r=8,p=1', 'ln=15,r=8,p=17', 'ln=0,r=8,p=1']) assert.throws(() => costOf(bad), ConfigError, bad);
  });
});
