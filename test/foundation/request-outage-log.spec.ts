/**
 * The API's error filter tells requests that found the database away once per outage
 * and reason (a warn line, no stack), and logs every other 5xx as it is: a 503 that is
 * not an outage (a hold release racing the request, one per account) must not take an
 * outage's place, or a later outage would go back to a stack per request.
 */
import type { ArgumentsHost } from '@nestjs/common';
import pino from 'pino';
import { DueHoldsRaceError } from '#payments/ledger';
import { ErrorFilter } from '../../apps/api/src/http/errors/error.filter';

/** The filter's view of one request and its reply. */
function hostOf(i: number): ArgumentsHost {
  const reply = { header: () => reply, status: () => reply, send: () => reply };
  const request = { id: `req-${i}`, method: 'POST', url: '/v1/payouts', raw: {} };
  return { switchToHttp: () => ({ getResponse: () => reply, getRequest: () => request }) } as unknown as ArgumentsHost;
}

it('after 503s that are not an outage (hold races of 30 accounts), an outage is told once, at warn, with no stack', () => {
  const lines: { level: number; msg: string; err?: unknown; url?: string }[] = [];
  const filter = new ErrorFilter(pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line) as (typeof lines)[number]) }));
  for (let i = 0; i < 30; i++) {
    filter.catch(new DueHoldsRaceError({ mode: 'live', accountId: `0f8c2d1e-${String(i).padStart(4, '0')}-4a5b-9c7d-1234567890ab` }), hostOf(i));
  }
  const before = lines.length;
  const refused = () => Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED', syscall: 'connect', errno: -111 });
  for (let i = 0; i < 5; i++) filter.catch(refused(), hostOf(100 + i));
  expect(lines.slice(before).map((l) => [l.level, l.msg, l.err !== undefined, l.url])).toEqual([
    [
      40,
      'API requests (ECONNREFUSED): the database is not reached; answering 503 provider_unavailable (said again once a minute while it lasts)',
      false,
      '/v1/payouts',
    ],
  ]);
});
