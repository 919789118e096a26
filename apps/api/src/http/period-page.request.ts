import { JSONSchema } from 'class-validator-jsonschema';
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
  @JSONSchema({ description: 'Произошли раньше этого момента (не включительно)' })
  to?: string;
}

/** The period and page a PeriodPageQuery asks for. */
export const periodPageOf = (query: PeriodPageQuery) => ({
  from: query.from === undefined ? undefined : new Date(query.from),
  to: query.to === undefined ? undefined : new Date(query.to),
  before: cursorSeqOf(query.cursor),
  limit: pageSizeOf(query.limit, 20),
});
