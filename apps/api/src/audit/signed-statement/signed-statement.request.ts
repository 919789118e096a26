import { IsIn, IsString } from 'class-validator';
import { JSONSchema } from 'class-validator-jsonschema';
import { LEDGER_MODES } from '#ledger';
import type { LedgerMode } from '#ledger';
import { IsIsoDateTime, MaxLength, Required, StorableText } from '../../http/request-rules';
import { MODE, MODE_DESCRIPTION } from '../../ledger/ledger-audit.request';

/** The query of GET /v1/statements: the period (from, to]. */
export class StatementQuery {
  @Required()
  @IsString()
  @StorableText()
  @MaxLength(40)
  @IsIsoDateTime()
  @JSONSchema({ description: 'Начало периода, не включая его: входящий остаток — баланс на этот момент (ISO 8601)' })
  from!: string;

  @Required()
  @IsString()
  @StorableText()
  @MaxLength(40)
  @IsIsoDateTime()
  @JSONSchema({ description: 'Конец периода, включительно (ISO 8601); не раньше from. Выписка закрытого периода одна и та же при каждом запросе' })
  to!: string;
}

/** The query of GET /admin/v1/accounts/{id}/signed-statement: the ledger's mode and the period. */
export class OperatorStatementQuery extends StatementQuery {
  @Required()
  @IsIn(LEDGER_MODES, MODE)
  @JSONSchema(MODE_DESCRIPTION)
  mode!: LedgerMode;
}
