import type { QueryBus } from '@nestjs/cqrs';
import { AwaitPostedThrough, REPORTED_READ_MODELS } from '#payments/audit';
import type { Follower, ReportedLedger } from '#payments/audit';
import { ApiError } from '../http/errors/api-error';
import { refuseReversedRange } from '../http/period-page.request';

/** The instants the finance and audit routes answer for (docs/finance-reports.md, "Periods and instants"). */

/** `from` not after `to` (both already real ISO instants). */
export function period(from: string, to: string): { from: Date; to: Date } {
  refuseReversedRange(from, to);
  return { from: new Date(from), to: new Date(to) };
}

/**
 * An instant a report answers for: not after the gateway clock's now (DESIGN: "at any past
 * instant"). A later one's figures are not known yet (a hold due before it shows held),
 * yet the report would carry it as its `to` or `asOf`: 400 `in_future` on `param`.
 */
export function pastInstant(at: Date, now: Date, param: 'to' | 'asOf', refusal: string): Date {
  if (at.getTime() > now.getTime()) throw ApiError.validation([{ param, code: 'in_future', message: `${param}: момент ещё не наступил: ${refusal}` }]);
  return at;
}

/** The refusal of an unsigned report whose `to` has not come yet. */
export const REPORT_PERIOD_NOT_ENDED = 'отчёт даётся только за прошедший период';
/** The refusal of a balance whose `asOf` has not come yet. */
export const BALANCE_NOT_KNOWN_YET = 'баланс даётся только на прошедший момент';
/** The refusal of a signed statement whose `to` has not come yet (its closing balance would be signed). */
export const SIGNED_PERIOD_NOT_ENDED = 'подписанная выписка даётся только за прошедший период';

/** The read models each report reads (the log itself needs none): it waits for them too. */
const { ledger, invoices, refunds, payouts } = REPORTED_READ_MODELS;
export const FOLLOWED = {
  log: [],
  ledger: [ledger],
  invoices: [invoices],
  flows: [ledger, invoices, refunds, payouts],
} as const satisfies Record<string, readonly Follower[]>;

/**
 * Waits until the figures as of `at` are final (every entry dated up to it posted and
 * read), so that a report for a past instant never changes afterwards; else 503 with
 * Retry-After (a projector stopped or far behind). docs/finance-reports.md.
 */
export async function postedThrough(queries: QueryBus, at: Date, now: Date, readers: readonly Follower[], ledger?: ReportedLedger): Promise<void> {
  if (await queries.execute(new AwaitPostedThrough(at, now, readers, ledger))) return;
  throw new ApiError(
    503,
    'provider_unavailable',
    'Проводки, датированные этим моментом или раньше, ещё записываются: цифры на него пока не окончательны, повторите запрос через секунду',
    undefined,
    undefined,
    { 'Retry-After': '1' },
  );
}
