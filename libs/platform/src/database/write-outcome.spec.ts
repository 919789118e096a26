/**
 * A write whose answer was lost is looked up only once its server process has ended
 * (outcomeOf): until then its COMMIT may still be running (a break on the client's
 * side), and a read that finds nothing proves nothing.
 */
import type { Pool } from 'pg';
import { outcomeOf, WriteOutcomeUnknownError } from './pool';

/** When the lost write's server process started (microseconds since the epoch). */
const STARTED_AT = '1764504000123456';

/** A server whose process `pid` ends when terminated, or never (`ends` false). */
function server(pid: number, ends: boolean): { pool: Pick<Pool, 'query'>; terminated: number[] } {
  const terminated: number[] = [];
  const query = async (text: string, values: unknown[]) => {
    if (text.includes('pg_terminate_backend')) terminated.push(values[0] as number);
    const listed = text.includes('pg_stat_activity') && !(ends && terminated.includes(pid));
    return { rowCount: listed ? 1 : 0, rows: listed ? [{ started: STARTED_AT }] : [] };
  };
  return { pool: { query } as unknown as Pick<Pool, 'query'>, terminated };
}

const lost = (pool: Pick<Pool, 'query'> | null, pid: number | null = 4242) =>
  new WriteOutcomeUnknownError(
    Object.assign(new Error('Connection terminated unexpectedly'), { code: 'ECONNRESET' }),
    pid === null ? null : { pid, startedAt: STARTED_AT },
    pool,
  );

describe('outcomeOf', () => {
  it('its process ended (terminated here), nothing found: not written, the lost connection is thrown', async () => {
    const { pool, terminated } = server(4242, true);
    const error = lost(pool);
    await expect(
      outcomeOf(
        () => Promise.reject(error),
        async () => null,
      ),
    ).rejects.toBe(error.cause);
    expect(terminated).toEqual([4242]);
  });

  it('its process still running (its COMMIT may yet land): nothing found proves nothing, the outcome stays unknown', async () => {
    jest.useFakeTimers({ doNotFake: ['nextTick', 'setImmediate', 'queueMicrotask'] });
    try {
      const { pool } = server(4242, false);
      const error = lost(pool);
      const answer = outcomeOf(
        () => Promise.reject(error),
        async () => null,
      );
      const settled = expect(answer).rejects.toBe(error);
      await jest.advanceTimersByTimeAsync(6_000);
      await settled;
    } finally {
      jest.useRealTimers();
    }
  });

  it("a look that gets no answer (a frozen server) leaves the outcome unknown after 10 s, not after its statements' bounds", async () => {
    jest.useFakeTimers({ doNotFake: ['nextTick', 'setImmediate', 'queueMicrotask'] });
    try {
      const pool = { query: () => new Promise(() => undefined) } as unknown as Pick<Pool, 'query'>;
      const error = lost(pool);
      let outcome: unknown = 'pending';
      const answer = outcomeOf(
        () => Promise.reject(error),
        () => new Promise<null>(() => undefined),
      ).catch((e: unknown) => (outcome = e));
      await jest.advanceTimersByTimeAsync(9_900);
      expect(outcome).toBe('pending');
      await jest.advanceTimersByTimeAsync(200);
      await answer;
      expect(outcome).toBe(error);
    } finally {
      jest.useRealTimers();
    }
  });

  it('its process not known: nothing found leaves the outcome unknown; found: the answer', async () => {
    const error = lost(null, null);
    await expect(
      outcomeOf(
        () => Promise.reject(error),
        async () => null,
      ),
    ).rejects.toBe(error);
    expect(
      await outcomeOf(
        () => Promise.reject(lost(null, null)),
        async () => 'written',
      ),
    ).toBe('written');
  });
});
