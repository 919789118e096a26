import { newEventId } from './event-ids';

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('newEventId', () => {
  it('is a UUID of version 7 whose first 48 bits are the current Unix time in milliseconds', () => {
    const before = Date.now();
    const id = newEventId();
    const after = Date.now();
    expect(id).toMatch(UUID_V7);
    const ms = parseInt(id.slice(0, 8) + id.slice(9, 13), 16);
    expect(ms).toBeGreaterThanOrEqual(before);
    expect(ms).toBeLessThanOrEqual(after);
  });

  it('makes distinct ids that sort in the order they were made, millisecond by millisecond', async () => {
    const ids: string[] = [];
    for (let round = 0; round < 3; round++) {
      for (let i = 0; i < 5_000; i++) ids.push(newEventId());
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
    expect(new Set(ids).size).toBe(ids.length);
    const stamps = ids.map((id) => id.slice(0, 13));
    expect([...stamps].sort()).toEqual(stamps);
    for (const id of ids) expect(id).toMatch(UUID_V7);
  });
});
