import { Controller, Get, Inject, Param, Query, Req, UseGuards } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import { QueryBus } from '@nestjs/cqrs';
import { isUuid } from '#domain';
import { formatMoney, LEDGER_ACCOUNTS, LedgerId, LedgerState } from '#ledger';
import { IsAccountKnown } from '#payments/audit';
import { GetBalanceAsOf } from '#payments/balance';
import { GetLedgerBalance } from '#payments/balance';
import { GetLedgerEntries } from '#payments/ledger';
import type { Clock } from '#platform/clock';
import { ApiError } from '../http/errors/api-error';
import { cursorSeqOf, encodeCursor, pageSizeOf } from '../http/cursor';
import { validRequest } from '../http/request-pipe';
import { LedgerBalanceQuery, LedgerEntriesQuery } from './ledger-audit.request';
import { CLOCK_TOKEN } from '../http/tokens';
import { AdminTokenGuard } from '../http/auth/admin-token.guard';
import { ReadsModels } from '../http/read-models';
import { BALANCE_NOT_KNOWN_YET, FOLLOWED, pastInstant, postedThrough } from '../audit/report-instants';
import { ReportBuilds } from '../audit/report-builds';

const ACCOUNT_ID = /^[A-Za-z0-9_-]{1,64}$/;

/** The `{id}` of an account's audit route (any text id a ledger may have; a UUID in either case, read lower-cased), or 400 on `id`. */
export function parseAccountId(id: string): string {
  if (!ACCOUNT_ID.test(id)) {
    throw ApiError.validation([{ param: 'id', code: 'invalid', message: 'id счёта: от 1 до 64 латинских букв, цифр, _ или -' }]);
  }
  return isUuid(id) ? id.toLowerCase() : id;
}

const balancesOnWire = (state: Pick<LedgerState, 'balances' | 'entries'>) => ({
  available: formatMoney(state.balances.available),
  pending: formatMoney(state.balances.pending),
  reserved: formatMoney(state.balances.reserved),
  currency: 'RUB',
  system: Object.fromEntries(LEDGER_ACCOUNTS.filter((a) => !['available', 'pending', 'reserved'].includes(a)).map((a) => [a, formatMoney(state.balances[a])])),
  entries: state.entries,
});

/** Audit of a merchant account's ledger: entries with postings, and balances rebuilt from the event log. */
@Controller('admin/v1/accounts')
@UseGuards(AdminTokenGuard)
export class LedgerAuditController {
  constructor(
    private readonly queries: QueryBus,
    @Inject(CLOCK_TOKEN) private readonly clock: Clock,
    private readonly builds: ReportBuilds,
  ) {}

  /** Journal entries with their postings, oldest first, in cursor pages (from the read model). */
  @ReadsModels('ledger')
  @Get(':id/ledger')
  async entries(@Param('id') id: string, @Query(validRequest) query: LedgerEntriesQuery) {
    const accountId = parseAccountId(id);
    const ledgerMode = query.mode;
    await this.known({ accountId, mode: ledgerMode });
    const page = await this.queries.execute(
      new GetLedgerEntries({ accountId, mode: ledgerMode }, cursorSeqOf(query.cursor) ?? -1, pageSizeOf(query.limit, 100)),
    );
    const hasMore = page.hasMore;
    return {
      accountId,
      mode: ledgerMode,
      items: page.items.map((r) => ({
        entryId: r.entryId,
        seq: r.seq,
        kind: r.kind,
        cause: r.cause,
        occurredAt: r.occurredAt.toISOString(),
        logPosition: r.logPosition,
        postings: r.postings.map((p) => ({ account: p.account, amount: formatMoney(p.amount) })),
      })),
      nextCursor: hasMore ? encodeCursor({ seq: page.items[page.items.length - 1]!.seq }) : null,
      hasMore,
    };
  }

  /**
   * The balance rebuilt from the event log, now or at any past instant (`asOf`, ISO 8601).
   * As of an instant the ledger's whole stream is read (log order says nothing of time),
   * in its turn (ReportBuilds). It is the log's own figure, not the read model's: an
   * auditor compares a statement drawn from the read model with it (docs/audit-log.md).
   */
  @Get(':id/balance')
  async balance(@Param('id') id: string, @Query(validRequest) query: LedgerBalanceQuery, @Req() request: FastifyRequest) {
    const accountId = parseAccountId(id);
    const ledger = { accountId, mode: query.mode };
    if (query.asOf === undefined) {
      await this.known(ledger);
      const state = await this.queries.execute(new GetLedgerBalance(ledger));
      return { accountId, mode: ledger.mode, asOf: this.clock.now().toISOString(), ...balancesOnWire(state) };
    }
    const now = this.clock.now();
    const instant = pastInstant(new Date(query.asOf), now, 'asOf', BALANCE_NOT_KNOWN_YET);
    await this.known(ledger);
    await postedThrough(this.queries, instant, now, FOLLOWED.log, ledger);
    const { lastEntryAt, ...state } = await this.builds.inTurn({ log: request.log }, { report: 'balance-as-of', accountId, mode: ledger.mode }, () =>
      this.queries.execute(new GetBalanceAsOf(ledger, instant)),
    );
    return { accountId, mode: ledger.mode, asOf: instant.toISOString(), lastEntryAt, ...balancesOnWire(state) };
  }

  /** 404 not_found for an account neither of the registry nor a ledger with entries, as for a statement. */
  private async known(ledger: LedgerId): Promise<void> {
    if (!(await this.queries.execute(new IsAccountKnown(ledger)))) throw ApiError.notFound('not_found', 'Аккаунт не найден');
  }
}
