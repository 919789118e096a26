import { Controller, Get, Inject, Param, Query, UseGuards } from '@nestjs/common';
import { QueryBus } from '@nestjs/cqrs';
import { formatMoney, LEDGER_ACCOUNTS, LedgerMode, LedgerState } from '#ledger';
import { GetBalanceAsOf } from '#payments/balance';
import { GetLedgerBalance } from '#payments/balance';
import { GetLedgerEntries } from '#payments/ledger';
import type { Clock } from '#platform/clock';
import { ApiError } from '../http/errors/api-error';
import { decodeCursor, encodeCursor, pageSeq } from '../http/cursor';
import { CLOCK_TOKEN } from '../http/tokens';
import { AdminTokenGuard } from '../http/auth/admin-token.guard';

const ACCOUNT_ID = /^[A-Za-z0-9_-]{1,64}$/;

function parseMode(mode: string | undefined): LedgerMode {
  if (mode === 'test' || mode === 'live') return mode;
  throw ApiError.validation([{ param: 'mode', code: 'invalid_enum', message: 'mode: test или live' }]);
}

function parseAccountId(id: string): string {
  if (!ACCOUNT_ID.test(id)) {
    throw ApiError.validation([{ param: 'id', code: 'invalid', message: 'id счёта: от 1 до 64 латинских букв, цифр, _ или -' }]);
  }
  return id;
}

function parseLimit(limit: string | undefined): number {
  if (limit === undefined) return 100;
  if (!/^\d{1,4}$/.test(limit) || Number(limit) < 1 || Number(limit) > 1000) {
    throw ApiError.validation([{ param: 'limit', code: 'out_of_range', message: 'limit: целое число от 1 до 1000' }]);
  }
  return Number(limit);
}

const balancesOnWire = (state: LedgerState) => ({
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
  ) {}

  /** Journal entries with their postings, oldest first, in cursor pages (from the read model). */
  @Get(':id/ledger')
  async entries(@Param('id') id: string, @Query('mode') mode?: string, @Query('limit') limit?: string, @Query('cursor') cursor?: string) {
    const accountId = parseAccountId(id);
    const ledgerMode = parseMode(mode);
    const pageSize = parseLimit(limit);
    const after = cursor === undefined ? -1 : decodeCursor(cursor, pageSeq);
    const page = await this.queries.execute(new GetLedgerEntries({ accountId, mode: ledgerMode }, after, pageSize));
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

  /** The balance rebuilt from the event log, now or at any past instant (`asOf`, ISO 8601). */
  @Get(':id/balance')
  async balance(@Param('id') id: string, @Query('mode') mode?: string, @Query('asOf') asOf?: string) {
    const accountId = parseAccountId(id);
    const ledger = { accountId, mode: parseMode(mode) };
    if (asOf === undefined) {
      const state = await this.queries.execute(new GetLedgerBalance(ledger));
      return { accountId, mode: ledger.mode, asOf: this.clock.now().toISOString(), ...balancesOnWire(state) };
    }
    const instant = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?(Z|[+-]\d{2}:\d{2})$/.test(asOf) ? new Date(asOf) : null;
    if (!instant || Number.isNaN(instant.getTime())) {
      throw ApiError.validation([{ param: 'asOf', code: 'invalid_datetime', message: 'asOf: дата и время в ISO 8601, например 2026-01-31T21:00:00Z' }]);
    }
    const { state, lastEntryAt } = await this.queries.execute(new GetBalanceAsOf(ledger, instant));
    return { accountId, mode: ledger.mode, asOf: instant.toISOString(), lastEntryAt, ...balancesOnWire(state) };
  }
}
