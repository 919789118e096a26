import { JSONSchema } from 'class-validator-jsonschema';
import { ApiError } from './errors/api-error';
import { cursorSeqOf, pageSizeOf } from './cursor';
import { IsCursor, IsoInstant, IsQueryInteger, Optional } from './request-rules';

/** The query fields of a list read in cursor pages (default 20). */
export class PageQuery {
  @Optional()
  @IsQueryInteger(1, 100)
  @JSONSchema({ description: 'Размер страницы', default: 20 })
  limit?: string;

  @Optional()
  @IsCursor()
  @JSONSchema({ description: 'nextCursor из предыдущего ответа' })
  cursor?: string;
}

/** The query fields of a list of things that happened: a createdAt range, and its pages. */
export class PeriodPageQuery extends PageQuery {
  @Optional()
  @IsoInstant()
  @JSONSchema({ description: 'Произошли в этот момент или позже (включительно)' })
  from?: string;

  @Optional()
  @IsoInstant()
  @JSONSchema({ description: 'Произошли раньше этого момента (не включительно); не раньше from (иначе 400 invalid_range)' })
  to?: string;
}

/**
 * A bound of a range [from, to) over times kept to the millisecond: the first whole
 * millisecond at or after the instant written, exact for either bound (`Date` drops
 * the fraction's digits past the third: 49.688500 would take in what was at 49.688).
 */
export const rangeBound = (text: string | undefined): Date | undefined => {
  if (text === undefined) return undefined;
  const at = new Date(text);
  return /\.\d{3}0*[1-9]/.test(text) ? new Date(at.getTime() + 1) : at;
};

/** A valid instant's order, to the last digit written: its millisecond, then the fraction's digits past the third. */
const instantOrder = (text: string): [number, string] => [new Date(text).getTime(), /\.\d{3}(\d*)/.exec(text)?.[1] ?? ''];

/** A `to` before `from` (valid instants, compared exactly): 400 validation, `invalid_range` on `to`, on every list and report. */
export function refuseReversedRange(from: string | undefined, to: string | undefined): void {
  if (from === undefined || to === undefined) return;
  const [fromMs, fromPast] = instantOrder(from);
  const [toMs, toPast] = instantOrder(to);
  const digits = Math.max(fromPast.length, toPast.length);
  if (toMs < fromMs || (toMs === fromMs && toPast.padEnd(digits, '0') < fromPast.padEnd(digits, '0'))) {
    throw ApiError.validation([{ param: 'to', code: 'invalid_range', message: 'Конец периода to не может быть раньше начала from' }]);
  }
}

/** The bounds of a list's [from, to) as asked (rangeBound), `to` not before `from`. */
export function rangeOf(query: { readonly from?: string; readonly to?: string }): { from: Date | undefined; to: Date | undefined } {
  refuseReversedRange(query.from, query.to);
  return { from: rangeBound(query.from), to: rangeBound(query.to) };
}

/** The period and page a PeriodPageQuery asks for. */
export const periodPageOf = (query: PeriodPageQuery) => ({
  ...rangeOf(query),
  before: cursorSeqOf(query.cursor),
  limit: pageSizeOf(query.limit, 20),
});
