/**
 * The persistent map behaves as a Map for every sequence of sets, and a version once
 * made never changes: each set leaves the map it was called on as it was.
 */
import fc from 'fast-check';
import { PersistentMap } from './persistent-map';
import { deepFreeze } from './testing/given-when-then';

describe('PersistentMap', () => {
  it('answers as a Map would, and every earlier version keeps its own entries', () => {
    // Few distinct keys, so sets often replace; short and long keys alike.
    // rf_10unw and rf_1xwba (and rf_10unt and rf_1xwbb) share a 32-bit hash: one bucket.
    // `__proto__` and `constructor`: names a plain object treats apart.
    const key = fc.oneof(
      fc.constantFrom('a', 'b', 'rf_1', '', 'rf_10unw', 'rf_1xwba', 'rf_10unt', 'rf_1xwbb', '__proto__', 'constructor'),
      fc.string({ maxLength: 30 }),
    );
    fc.assert(
      fc.property(fc.array(fc.tuple(key, fc.integer()), { maxLength: 300 }), (sets) => {
        let map = deepFreeze(PersistentMap.empty<number>());
        const model = new Map<string, number>();
        const versions: [PersistentMap<number>, Map<string, number>][] = [[map, new Map()]];
        for (const [k, v] of sets) {
          map = deepFreeze(map.set(k, v));
          model.set(k, v);
          versions.push([map, new Map(model)]);
        }
        for (const [version, expected] of versions) {
          expect(version.size).toBe(expected.size);
          expect(version.toRecord()).toEqual(Object.fromEntries(expected));
          for (const [k, v] of expected) expect(version.get(k)).toBe(v);
        }
        expect(map.has('not a key of fast-check: too long to be drawn, over thirty characters')).toBe(false);
      }),
    );
  });

  it('holds thousands of keys, each found again', () => {
    let map = PersistentMap.empty<number>();
    for (let i = 0; i < 20_000; i++) map = map.set(`rf_${i.toString(36).padStart(24, '0')}`, i);
    expect(map.size).toBe(20_000);
    for (let i = 0; i < 20_000; i += 7) expect(map.get(`rf_${i.toString(36).padStart(24, '0')}`)).toBe(i);
    expect(map.get('rf_')).toBeUndefined();
  });
});
