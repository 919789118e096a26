import { IsIn } from 'class-validator';
import { JSONSchema } from 'class-validator-jsonschema';
import { LEDGER_MODES } from '#ledger';
import type { LedgerMode } from '#ledger';
import { IsoInstant, Optional, Required } from '../http/request-rules';
import { MODE, MODE_DESCRIPTION } from '../ledger/ledger-audit.request';

export const REPORT_FORMATS = ['json', 'csv'] as const;
export type ReportFormat = (typeof REPORT_FORMATS)[number];
const FORMAT = { description: 'json или csv; без него: по заголовку Accept (text/csv — CSV), иначе JSON' } as const;

/** The query of GET /admin/v1/accounts/{id}/statement: entries that occurred after `from` and at or before `to`. */
export class AccountStatementQuery {
  @Required()
  @IsIn(LEDGER_MODES, MODE)
  @JSONSchema(MODE_DESCRIPTION)
  mode!: LedgerMode;

  @Required()
  @IsoInstant()
  @JSONSchema({ description: 'Начало периода, не включая его: входящий остаток — баланс на этот момент (ISO 8601)' })
  from!: string;

  @Required()
  @IsoInstant()
  @JSONSchema({ description: 'Конец периода, включительно (ISO 8601); не раньше from' })
  to!: string;

  @Optional()
  @IsIn(REPORT_FORMATS)
  @JSONSchema(FORMAT)
  format?: ReportFormat;
}

/** The query of GET /admin/v1/audit/trial-balance. */
export class TrialBalanceQuery {
  @Optional()
  @IsoInstant()
  @JSONSchema({ description: 'Момент, на который собрать оборотно-сальдовую ведомость (ISO 8601, включительно); без него: сейчас' })
  asOf?: string;

  @Optional()
  @IsIn(REPORT_FORMATS)
  @JSONSchema(FORMAT)
  format?: ReportFormat;
}

/** A period (from, to]: the query of GET /v1/statements, and the start of others'. */
export class PeriodQuery {
  @Required()
  @IsoInstant()
  @JSONSchema({ description: 'Начало периода, не включая его (ISO 8601)' })
  from!: string;

  @Required()
  @IsoInstant()
  @JSONSchema({ description: 'Конец периода, включительно (ISO 8601); не раньше from' })
  to!: string;
}

/** The query of GET /admin/v1/audit/reconciliation: flows and entries of (from, to]. */
export class ReconciliationQuery extends PeriodQuery {
  @Optional()
  @IsIn(REPORT_FORMATS)
  @JSONSchema(FORMAT)
  format?: ReportFormat;
}
