import { randomFillSync } from 'node:crypto';

const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));
const pool = new Uint8Array(16 * 256);
let next = pool.length;

/**
 * A new event id: a UUID of version 7 (RFC 9562), its first 48 bits the Unix time in
 * milliseconds, the other 74 random. Ids made one after another sort in time, so the
 * log's unique index on event_id takes each at its right edge instead of at a random
 * leaf: on a large log, an append after a checkpoint writes one leaf page fewer whole
 * into the WAL (docs/benchmarks.md). Nothing reads the time back; it only orders ids.
 */
export function newEventId(): string {
  if (next === pool.length) {
    randomFillSync(pool);
    next = 0;
  }
  const b = pool.subarray(next, next + 16);
  next += 16;
  const ms = Date.now();
  const high = Math.floor(ms / 0x1_0000_0000);
  b[0] = (high >>> 8) & 0xff;
  b[1] = high & 0xff;
  b[2] = (ms >>> 24) & 0xff;
  b[3] = (ms >>> 16) & 0xff;
  b[4] = (ms >>> 8) & 0xff;
  b[5] = ms & 0xff;
  b[6] = (b[6]! & 0x0f) | 0x70;
  b[8] = (b[8]! & 0x3f) | 0x80;
  let id = '';
  for (let i = 0; i < 16; i++) {
    if (i === 4 || i === 6 || i === 8 || i === 10) id += '-';
    id += HEX[b[i]!];
  }
  return id;
}
