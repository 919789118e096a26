import type { LedgerMode } from '#ledger';
import { pageSeq } from '../http/cursor';
import { Cursor, DateTime, OneOf, QueryInteger } from '../http/request-fields';

const LEDGER_MODES: readonly LedgerMode[] = ['test', 'live'];
const MODE = { required: true, message: 'test или live', description: 'Какой журнал: test или live' } as const;

/** The query of GET /admin/v1/accounts/{id}/ledger. */
export class LedgerEntriesQuery {
  @OneOf(LEDGER_MODES, MODE)
  mode!: LedgerMode;

  @QueryInteger({ min: 1, max: 1000, default: 100, description: 'Размер страницы' })
  limit?: string;

  @Cursor(pageSeq, { description: 'nextCursor из предыдущего ответа' })
  cursor?: string;
}

/** The query of GET /admin/v1/accounts/{id}/balance. */
export class LedgerBalanceQuery {
  @OneOf(LEDGER_MODES, MODE)
  mode!: LedgerMode;

  @DateTime({ description: 'Момент, на который пересчитать баланс (ISO 8601); без него: сейчас' })
  asOf?: string;
}
