/**
 * The database away, told once per outage (review40): an append whose answer was lost
 * with its connection (AppendOutcomeUnknownError, its cause the lost socket) is the
 * database away, not an error with a stack; and a worker's items do not each log an
 * error-level stack when the database goes away under them (up to 100 a tick at an
 * outage's start): the first such failure ends the tick, thrown to the worker, whose
 * outage log (DatabaseOutageLog) tells it once. A real item failure stays at error level.
 */
import pino from 'pino';
import { AppendOutcomeUnknownError } from '#event-store';
import { ManualClock } from '#platform/clock';
import { DatabaseOutageLog, isDatabaseAway } from '#platform/database';
import { WorkerItems } from '#payments/flows';

const socketError = (code: string, syscall?: string) => Object.assign(new Error(`${syscall ?? 'read'} ${code}`), { code, syscall });

describe('the database away, behind a wrapper and under a worker’s items', () => {
  it('an error whose cause is the database away is the database away; a configuration error stays one', () => {
    expect(isDatabaseAway(new AppendOutcomeUnknownError('payout-1', { cause: socketError('ECONNRESET') }))).toBe(true);
    expect(isDatabaseAway(new Error('outer', { cause: new Error('middle', { cause: socketError('ECONNREFUSED', 'connect') }) }))).toBe(true);
    expect(isDatabaseAway(new AppendOutcomeUnknownError('payout-1', { cause: new TypeError('x is undefined') }))).toBe(false);
    expect(isDatabaseAway(new Error('outer', { cause: Object.assign(new Error('password authentication failed'), { code: '28P01' }) }))).toBe(false);
  });

  it('an outage log never told it ended (requests) counts a failure after a quiet interval as a new outage; a poller’s runs on', async () => {
    const lines: { level: number; msg: string; failures: number; url?: string }[] = [];
    const log = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line) as (typeof lines)[number]) });
    const requests = new DatabaseOutageLog(log, 'API requests', { retoldEveryMs: 200, meanwhile: 'answering 503', quietEndsOutage: true });
    const poller = new DatabaseOutageLog(log, 'worker w', { retoldEveryMs: 200 });
    for (let i = 0; i < 5; i++) expect(requests.failed(socketError('ECONNREFUSED', 'connect'), { url: `/${i}` })).toBe(true);
    expect(requests.failed(new Error('a bug'))).toBe(false);
    expect(poller.failed(socketError('ECONNREFUSED', 'connect'))).toBe(true);
    await new Promise((r) => setTimeout(r, 250));
    expect(requests.failed(socketError('ECONNRESET'), { url: '/5' })).toBe(true);
    expect(poller.failed(socketError('ECONNRESET'))).toBe(true);
    expect(lines.map((l) => [l.level, l.msg, l.failures, l.url])).toEqual([
      [40, 'API requests: the database is not reached; answering 503 (said again once a minute while it lasts)', 1, '/0'],
      [40, 'worker w: the database is not reached; retrying (said again once a minute while it lasts)', 1, undefined],
      [40, 'API requests: the database is not reached; answering 503 (said again once a minute while it lasts)', 1, '/5'],
      [40, 'worker w: the database is not reached; retrying (said again once a minute while it lasts)', 2, undefined],
    ]);
  });

  it('the first item meeting the database away ends the tick without an error line; a real failure is still logged', async () => {
    const clock = new ManualClock(() => Date.parse('2026-04-01T00:00:00Z'));
    const lines: { level: number; msg: string; item?: string }[] = [];
    const log = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line) as { level: number; msg: string }) });
    const counted: string[] = [];
    const items = new WorkerItems('flow-recovery', clock, log, (worker) => counted.push(worker));
    const away = new AppendOutcomeUnknownError('payout-2', { cause: socketError('ECONNREFUSED', 'connect') });
    const tried: string[] = [];
    const each = items.each(
      ['poison', 'away', ...Array.from({ length: 98 }, (_, i) => `left-${i}`)],
      (id) => id,
      async (id) => {
        tried.push(id);
        if (id === 'poison') throw new TypeError('cannot read properties of undefined');
        if (id === 'away' || id.startsWith('left-')) throw away;
      },
    );
    await expect(each).rejects.toBe(away);
    expect(tried).toEqual(['poison', 'away']);
    expect(lines.map((l) => ({ level: l.level, item: l.item }))).toEqual([{ level: 50, item: 'poison' }]);
    expect(counted).toEqual(['flow-recovery']);
    // Not the item's failure: tried again with the next tick.
    expect(items.backingOff()).toEqual(['poison']);
  });
});
