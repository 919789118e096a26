import { IsIn } from 'class-validator';
import { JSONSchema } from 'class-validator-jsonschema';
import { BALANCE_TRANSACTION_TYPES } from '#ledger';
import type { BalanceTransactionType } from '#ledger';
import { IsQueryInteger, Optional } from '../http/request-rules';
import { PeriodPageQuery } from '../http/period-page.request';
import { REPORT_FORMATS } from '../audit/audit-reports.request';
import type { ReportFormat } from '../audit/audit-reports.request';

/** The query of GET /v1/balance/transactions. */
export class ListBalanceTransactionsQuery extends PeriodPageQuery {
  @Optional()
  @IsIn(BALANCE_TRANSACTION_TYPES)
  @JSONSchema({ description: 'Тип движения' })
  type?: BalanceTransactionType;

  @Optional()
  @IsQueryInteger(1, Number.MAX_SAFE_INTEGER)
  @JSONSchema({ description: 'Выплата: её резерв, выплата и возврат' })
  payoutId?: string;

  @Optional()
  @IsIn(REPORT_FORMATS)
  @JSONSchema({ description: 'json или csv (все движения, без страниц); без него: по заголовку Accept (text/csv — CSV)' })
  format?: ReportFormat;
}
