import type { LedgerMode } from '#ledger';
import { DateTime, OneOf } from '../http/request-fields';

const LEDGER_MODES: readonly LedgerMode[] = ['test', 'live'];
export const REPORT_FORMATS = ['json', 'csv'] as const;
export type ReportFormat = (typeof REPORT_FORMATS)[number];
const FORMAT = { description: 'json или csv; без него: по заголовку Accept (text/csv — CSV), иначе JSON' } as const;

/** The query of GET /admin/v1/accounts/{id}/statement: entries that occurred after `from` and at or before `to`. */
export class AccountStatementQuery {
  @OneOf(LEDGER_MODES, { required: true, message: 'test или live', description: 'Какой журнал: test или live' })
  mode!: LedgerMode;

  @DateTime({ required: true, description: 'Начало периода, не включая его: входящий остаток — баланс на этот момент (ISO 8601)' })
  from!: string;

  @DateTime({ required: true, description: 'Конец периода, включительно (ISO 8601); не раньше from' })
  to!: string;

  @OneOf(REPORT_FORMATS, FORMAT)
  format?: ReportFormat;
}

/** The query of GET /admin/v1/audit/trial-balance. */
export class TrialBalanceQuery {
  @DateTime({ description: 'Момент, на который собрать оборотно-сальдовую ведомость (ISO 8601, включительно); без него: сейчас' })
  asOf?: string;

  @OneOf(REPORT_FORMATS, FORMAT)
  format?: ReportFormat;
}

/** The query of GET /admin/v1/audit/reconciliation: flows and entries of (from, to]. */
export class ReconciliationQuery {
  @DateTime({ required: true, description: 'Начало периода, не включая его (ISO 8601)' })
  from!: string;

  @DateTime({ required: true, description: 'Конец периода, включительно (ISO 8601); не раньше from' })
  to!: string;

  @OneOf(REPORT_FORMATS, FORMAT)
  format?: ReportFormat;
}
