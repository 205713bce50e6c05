/** wsload channels' plan of the clients (who sends, which channel) and the position a joining client resumes from. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ChannelPositions, channelOf, isSender } from '../src/channels.ts';

test('senders: the given share of the clients, spread evenly, and on every channel when the channels are odd', () => {
  const senders = (ratio: number, n: number) => Array.from({ length: n }, (_, i) => i).filter((i) => isSender(i, ratio));
  assert.equal(senders(0.5, 1500).length, 750);
  assert.equal(senders(0.3, 1000).length, 300);
  assert.equal(senders(0, 100).length, 0);
  assert.equal(senders(1, 100).length, 100);
  const perChannel = [0, 0, 0, 0, 0];
  for (const i of senders(0.5, 1500)) perChannel[channelOf(i, 5)]!++;
  assert.deepEqual(perChannel, [150, 150, 150, 150, 150]);
});

test('since: `back` behind the latest position seen on the channel, none before one was seen or with back 0', () => {
  const positions = new ChannelPositions();
  assert.equal(positions.sinceFor(0, 80), undefined);
  positions.see(0, { offset: 100, epoch: 'a' });
  positions.see(0, { offset: 90, epoch: 'a' });
  assert.deepEqual(positions.sinceFor(0, 80), { offset: 20, epoch: 'a' });
  assert.deepEqual(positions.sinceFor(0, 500), { offset: 0, epoch: 'a' });
  assert.equal(positions.sinceFor(0, 0), undefined);
  assert.equal(positions.sinceFor(1, 80), undefined);
  // A new epoch (the history was lost) replaces the old one's position, whatever its offset.
  positions.see(0, { offset: 3, epoch: 'b' });
  assert.deepEqual(positions.sinceFor(0, 2), { offset: 1, epoch: 'b' });
});
