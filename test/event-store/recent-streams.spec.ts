/**
 * The recent streams a read of the log remembers (RecentStreams, decision 0123): what
 * it answers for a stream is always that stream's last remembered event, a stream met
 * within a generation is still there, and it never holds more than two generations.
 */
import { CHAIN_HASH_BYTES, RecentStreams } from '#event-store';
import { intBelow, seededRandom } from '../support/test-seed';

describe('the recent streams of a read of the log', () => {
  it('answers only the last event remembered of a stream, keeps a stream met within a generation, and holds at most two generations (seeded)', () => {
    const rng = seededRandom('recent streams');
    for (let run = 0; run < 40; run++) {
      const generation = intBelow(rng, 1, 12);
      const recent = new RecentStreams(generation);
      const last = new Map<string, { revision: number; hash: Buffer | null }>();
      /** Streams met, most recent last (a stream moves to the end when met). */
      const met: string[] = [];
      const meet = (name: string) => {
        const at = met.indexOf(name);
        if (at >= 0) met.splice(at, 1);
        met.push(name);
      };
      for (let step = 0; step < 400; step++) {
        const name = `stream-${intBelow(rng, 0, 3 * generation + 2)}`;
        if (rng.chance(0.5)) {
          const revision = intBelow(rng, 0, 1000);
          const hash = rng.chance(0.9) ? Buffer.from(Array.from({ length: CHAIN_HASH_BYTES }, () => intBelow(rng, 0, 256))) : null;
          // Given at an offset in a larger buffer, as a row's bytes are.
          recent.remember(name, revision, hash === null ? null : Buffer.concat([Buffer.alloc(5), hash]), 5);
          last.set(name, { revision, hash });
          meet(name);
        } else {
          const slot = recent.find(name);
          const recentlyMet = met.slice(-generation).includes(name);
          if (recentlyMet) expect(slot).toBeGreaterThanOrEqual(0);
          if (slot >= 0) {
            const expected = last.get(name)!;
            expect(recent.revisions[slot]).toBe(expected.revision);
            expect(recent.hashed[slot] === 1 ? recent.hashes.subarray(slot * CHAIN_HASH_BYTES, (slot + 1) * CHAIN_HASH_BYTES) : null).toEqual(expected.hash);
            meet(name);
          }
        }
        expect(recent.size).toBeLessThanOrEqual(2 * generation);
      }
    }
  });

  it('refuses a generation of no stream', () => {
    expect(() => new RecentStreams(0)).toThrow('at least one stream');
  });
});
