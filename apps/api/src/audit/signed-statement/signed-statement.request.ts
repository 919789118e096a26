import { IsIn } from 'class-validator';
import { JSONSchema } from 'class-validator-jsonschema';
import { LEDGER_MODES } from '#ledger';
import type { LedgerMode } from '#ledger';
import { Required } from '../../http/request-rules';
import { MODE, MODE_DESCRIPTION } from '../../ledger/ledger-audit.request';
import { PeriodQuery } from '../audit-reports.request';

/** The query of GET /admin/v1/accounts/{id}/signed-statement: the period and the ledger's mode (GET /v1/statements: PeriodQuery). */
export class OperatorStatementQuery extends PeriodQuery {
  @Required()
  @IsIn(LEDGER_MODES, MODE)
  @JSONSchema(MODE_DESCRIPTION)
  mode!: LedgerMode;
}
