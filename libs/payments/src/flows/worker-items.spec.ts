import pino from 'pino';
import { ManualClock } from '#platform/clock';
import { WorkerItems } from './worker-items';

/** A gateway clock the test moves by hand, and a logger whose lines it reads. */
function setUp() {
  let now = Date.parse('2026-04-01T00:00:00Z');
  const clock = new ManualClock(() => now);
  const lines: Record<string, unknown>[] = [];
  const log = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
  const failures: string[] = [];
  const items = new WorkerItems('flow-recovery', clock, log, (worker) => failures.push(worker), { firstDelayMs: 1_000, maxDelayMs: 8_000 });
  return { items, lines, failures, pass: (ms: number) => (now += ms) };
}

describe('WorkerItems: each item fails alone', () => {
  it('an item that throws is logged with its id and counted; the items after it are processed in the same tick', async () => {
    const { items, lines, failures } = setUp();
    const done: string[] = [];
    const tried = await items.each(
      ['a', 'poison', 'b'],
      (id) => id,
      async (id) => {
        if (id === 'poison') throw new TypeError('cannot read properties of undefined');
        done.push(id);
      },
    );
    expect(tried).toBe(3);
    expect(done).toEqual(['a', 'b']);
    expect(failures).toEqual(['flow-recovery']);
    expect(lines).toEqual([
      expect.objectContaining({
        level: 50,
        worker: 'flow-recovery',
        item: 'poison',
        failures: 1,
        retryAt: '2026-04-01T00:00:01.000Z',
        err: expect.objectContaining({ message: 'cannot read properties of undefined' }),
      }),
    ]);
  });

  it('a failing item is left out of the selection until its back-off passes: 1 s, doubling, at most the longest wait', async () => {
    const { items, pass } = setUp();
    const fail = () =>
      items.each(
        ['poison'],
        (id) => id,
        async () => Promise.reject(new Error('still broken')),
      );
    const waits: number[] = [];
    for (let attempt = 0; attempt < 6; attempt++) {
      await fail();
      let waited = 0;
      while (items.backingOff().includes('poison')) {
        pass(250);
        waited += 250;
      }
      waits.push(waited);
    }
    expect(waits).toEqual([1_000, 2_000, 4_000, 8_000, 8_000, 8_000]);
    expect(items.failuresOf('poison')).toBe(6);
  });

  it('a success clears the failures (logged once); an item not seen for long is forgotten', async () => {
    const { items, lines, pass } = setUp();
    await items.each(
      ['x', 'y'],
      (id) => id,
      async () => Promise.reject(new Error('down')),
    );
    pass(1_000);
    await items.each(
      ['x'],
      (id) => id,
      async () => undefined,
    );
    expect(items.failuresOf('x')).toBe(0);
    expect(lines[lines.length - 1]).toEqual(expect.objectContaining({ level: 30, item: 'x', failures: 1, msg: 'worker item processed after failing' }));
    // y is due again but never comes back: forgotten once the longest wait has passed too.
    expect(items.failuresOf('y')).toBe(1);
    pass(8_001);
    expect(items.backingOff()).toEqual([]);
    expect(items.failuresOf('y')).toBe(0);
  });
});
