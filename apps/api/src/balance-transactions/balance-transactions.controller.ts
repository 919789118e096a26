import { Readable } from 'node:stream';
import { Controller, Get, Headers, Inject, Query, Res, UseGuards } from '@nestjs/common';
import { QueryBus } from '@nestjs/cqrs';
import type { FastifyReply } from 'fastify';
import { formatMoney } from '#ledger';
import type { RebuildState } from '#event-store/projections';
import { BalanceTransaction, BalanceTransactionFilter, ListBalanceTransactions } from '#payments/ledger';
import type { MerchantIdentity } from '#payments/merchants';
import { encodeCursor } from '../http/cursor';
import { periodPageOf } from '../http/period-page.request';
import { validRequest } from '../http/request-pipe';
import { Merchant, MerchantAuthGuard } from '../http/auth/merchant-auth.guard';
import { loggedWhenCutOff, ReadsModels } from '../http/read-models';
import { HeavyRead } from '../http/heavy-reads';
import { csvAttachment, CSV_CONTENT_TYPE, csvRecord, fileStamp, wantsCsv } from '../audit/csv';
import { ListBalanceTransactionsQuery } from './list-balance-transactions.request';
import type { Clock } from '#platform/clock';
import { CLOCK_TOKEN } from '../http/tokens';
import { FOLLOWED, postedThrough } from '../audit/report-instants';

/** A balance transaction on the wire: money as the API writes it, signed. */
export const balanceTransactionView = (t: BalanceTransaction) => ({
  id: t.id,
  type: t.type,
  amount: formatMoney(t.amount),
  bucket: t.bucket,
  balanceAfter: formatMoney(t.balanceAfter),
  fee: t.fee === null ? null : formatMoney(t.fee),
  currency: 'RUB' as const,
  createdAt: t.createdAt.toISOString(),
  availableAt: t.availableAt?.toISOString() ?? null,
  invoiceId: t.invoiceId,
  refundId: t.refundId,
  payoutId: t.payoutId,
});

/** The CSV's columns: the JSON fields, in their order. */
const CSV_COLUMNS = [
  'id',
  'type',
  'amount',
  'bucket',
  'balanceAfter',
  'fee',
  'currency',
  'createdAt',
  'availableAt',
  'invoiceId',
  'refundId',
  'payoutId',
] as const;
/** Rows per query of a CSV export. */
const CSV_PAGE = 1000;

@Controller('v1/balance')
@UseGuards(MerchantAuthGuard)
export class BalanceTransactionsController {
  constructor(
    private readonly queries: QueryBus,
    @Inject(CLOCK_TOKEN) private readonly clock: Clock,
  ) {}

  /** Every movement of the account's balance in the key's mode, newest first: cursor pages, or all of them as CSV. */
  @ReadsModels('ledger')
  @Get('transactions')
  @HeavyRead(ListBalanceTransactionsQuery, periodPageOf)
  async list(
    @Merchant() merchant: MerchantIdentity,
    @Query(validRequest) query: ListBalanceTransactionsQuery,
    @Headers('accept') accept: string | undefined,
    @Res() reply: FastifyReply,
  ) {
    const filter: BalanceTransactionFilter = {
      accountId: merchant.project.accountId,
      mode: merchant.mode,
      type: query.type,
      payoutId: query.payoutId === undefined ? undefined : Number(query.payoutId),
      ...periodPageOf(query),
    };
    // A period that has ended is listed once final, as the reports are: its rows never change afterwards.
    const now = this.clock.now();
    if (filter.to !== undefined && filter.to.getTime() <= now.getTime()) {
      await postedThrough(this.queries, filter.to, now, FOLLOWED.ledger, { accountId: filter.accountId, mode: filter.mode });
    }
    if (wantsCsv(query.format, accept)) {
      // Named by mode and period (its ends that were given), as the operator's report downloads are.
      const period = `${filter.from ? `-from-${fileStamp(filter.from)}` : ''}${filter.to ? `-to-${fileStamp(filter.to)}` : ''}`;
      return reply
        .status(200)
        .header('content-type', CSV_CONTENT_TYPE)
        .header('content-disposition', csvAttachment(`balance-transactions-${filter.mode}${period}`))
        .send(
          Readable.from(loggedWhenCutOff(this.csv(filter), reply.log, { export: 'balance-transactions', accountId: filter.accountId, mode: filter.mode }), {
            objectMode: false,
          }),
        );
    }
    const page = await this.queries.execute(new ListBalanceTransactions(filter));
    return reply.status(200).send({
      items: page.items.map(balanceTransactionView),
      nextCursor: page.hasMore ? encodeCursor({ seq: page.items[page.items.length - 1]!.position }) : null,
      hasMore: page.hasMore,
    });
  }

  /** The CSV, a page per query: the next page is read only when the socket took the previous one. */
  private async *csv(filter: BalanceTransactionFilter): AsyncGenerator<string> {
    yield csvRecord(CSV_COLUMNS);
    // The pages of one ledger: a rebuild begun since the first (even one ended since) cuts the file off.
    let since: RebuildState | undefined;
    for (let before = filter.before, more = true; more;) {
      const page = await this.queries.execute(new ListBalanceTransactions({ ...filter, before, limit: CSV_PAGE }, since));
      since ??= page.rebuildState;
      yield page.items
        .map((t) => {
          const view = balanceTransactionView(t);
          return csvRecord(CSV_COLUMNS.map((c) => view[c]));
        })
        .join('');
      before = page.items[page.items.length - 1]?.position ?? null;
      more = page.hasMore;
    }
  }
}
