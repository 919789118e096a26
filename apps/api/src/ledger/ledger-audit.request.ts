import { IsIn } from 'class-validator';
import { JSONSchema } from 'class-validator-jsonschema';
import { LEDGER_MODES } from '#ledger';
import type { LedgerMode } from '#ledger';
import { IsCursor, IsoInstant, IsQueryInteger, Optional, Required } from '../http/request-rules';

/** The `mode` of an operator's ledger query says its values in words of its own. */
export const MODE = { message: 'test или live' };
export const MODE_DESCRIPTION = { description: 'Какой журнал: test или live' };

/** The query of GET /admin/v1/accounts/{id}/ledger. */
export class LedgerEntriesQuery {
  @Required()
  @IsIn(LEDGER_MODES, MODE)
  @JSONSchema(MODE_DESCRIPTION)
  mode!: LedgerMode;

  @Optional()
  @IsQueryInteger(1, 1000)
  @JSONSchema({ description: 'Размер страницы', default: 100 })
  limit?: string;

  @Optional()
  @IsCursor()
  @JSONSchema({ description: 'nextCursor из предыдущего ответа' })
  cursor?: string;
}

/** The query of GET /admin/v1/accounts/{id}/balance. */
export class LedgerBalanceQuery {
  @Required()
  @IsIn(LEDGER_MODES, MODE)
  @JSONSchema(MODE_DESCRIPTION)
  mode!: LedgerMode;

  @Optional()
  @IsoInstant()
  @JSONSchema({ description: 'Момент, на который пересчитать баланс (ISO 8601); без него: сейчас' })
  asOf?: string;
}
