import { Readable } from 'node:stream';
import { Controller, Get, Headers, Inject, Param, Query, Res, UseGuards } from '@nestjs/common';
import { QueryBus } from '@nestjs/cqrs';
import type { FastifyReply } from 'fastify';
import { AccountBalances, formatMoney, LEDGER_ACCOUNTS, MERCHANT_ACCOUNTS, StatementBalances, SYSTEM_ACCOUNTS, TrialBalance } from '#ledger';
import { GetAccountStatement, GetReconciliation, GetTrialBalance } from '#payments/audit';
import type { AccountStatementReader, ReconciliationReport } from '#payments/audit';
import type { Clock } from '#platform/clock';
import { ApiError } from '../http/errors/api-error';
import { AdminTokenGuard } from '../http/auth/admin-token.guard';
import { validRequest } from '../http/request-pipe';
import { CLOCK_TOKEN } from '../http/tokens';
import { AccountStatementQuery, ReconciliationQuery, TrialBalanceQuery } from './audit-reports.request';
import { CSV_CONTENT_TYPE, csvRecord, fileStamp, wantsCsv } from './csv';
import { parseAccountId } from '../ledger/ledger-audit.controller';
import { loggedWhenCutOff, ReadsModels } from '../http/read-models';
import { BALANCE_NOT_KNOWN_YET, FOLLOWED, pastInstant, period, postedThrough, REPORT_PERIOD_NOT_ENDED } from './report-instants';

const JSON_CONTENT_TYPE = 'application/json; charset=utf-8';

/** Balances as the ledger audit routes show them: the three merchant accounts, then `system`. */
const balancesOnWire = (b: AccountBalances) => ({
  available: formatMoney(b.available),
  pending: formatMoney(b.pending),
  reserved: formatMoney(b.reserved),
  system: Object.fromEntries(SYSTEM_ACCOUNTS.map((a) => [a, formatMoney(b[a])])),
});
const merchantBalancesOnWire = (b: AccountBalances) => ({
  available: formatMoney(b.available),
  pending: formatMoney(b.pending),
  reserved: formatMoney(b.reserved),
});

const STATEMENT_CSV_HEADER = ['record', 'entry_id', 'seq', 'occurred_at', 'kind', 'cause', 'account', 'amount', 'balance_after'];

/**
 * The statement's text, page by page: each yielded string is one page of entries (one
 * query), so the reply is written as the pages are read and never held whole. Readable.from
 * asks for the next page only when the socket took the previous one (backpressure); no
 * connection or transaction is held in between.
 */
async function* statementText(reader: AccountStatementReader, head: Record<string, string>, csv: boolean): AsyncGenerator<string> {
  const running = new StatementBalances(reader.opening);
  if (csv) {
    yield (
      csvRecord(STATEMENT_CSV_HEADER) +
      LEDGER_ACCOUNTS.map((a) => csvRecord(['opening', '', '', head.from, '', '', a, '', formatMoney(reader.opening[a])])).join('')
    );
  } else {
    yield `{${Object.entries(head)
      .map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v)}`)
      .join(',')},"currency":"RUB","opening":${JSON.stringify(balancesOnWire(reader.opening))},"entries":[`;
  }
  let first = true;
  for await (const page of reader.pages()) {
    let text = '';
    for (const entry of page) {
      const occurredAt = entry.occurredAt.toISOString();
      if (csv) {
        // Each posting's line carries its account's balance after it: replay posting by posting.
        const lines: string[] = [];
        for (const p of entry.postings) {
          const after = running.apply([p]);
          lines.push(
            csvRecord([
              'posting',
              entry.entryId,
              entry.seq,
              occurredAt,
              entry.kind,
              entry.cause,
              p.account,
              formatMoney(p.amount),
              formatMoney(after[p.account as keyof AccountBalances]),
            ]),
          );
        }
        if (entry.postings.length === 0) {
          running.apply([]);
          lines.push(csvRecord(['entry', entry.entryId, entry.seq, occurredAt, entry.kind, entry.cause, '', '', '']));
        }
        text += lines.join('');
      } else {
        const after = running.apply(entry.postings);
        text += `${first ? '' : ','}${JSON.stringify({
          entryId: entry.entryId,
          seq: entry.seq,
          kind: entry.kind,
          cause: entry.cause,
          occurredAt,
          logPosition: entry.logPosition,
          postings: entry.postings.map((p) => ({ account: p.account, amount: formatMoney(p.amount) })),
          balancesAfter: merchantBalancesOnWire(after),
        })}`;
        first = false;
      }
    }
    yield text;
  }
  const closing = running.closing();
  const movements = running.movements();
  if (csv) {
    yield LEDGER_ACCOUNTS.map((a) => csvRecord(['closing', '', '', head.to, '', '', a, formatMoney(movements[a]), formatMoney(closing[a])])).join('');
  } else {
    yield `],"entryCount":${running.entries()},"movements":${JSON.stringify(balancesOnWire(movements))},"closing":${JSON.stringify(balancesOnWire(closing))}}`;
  }
}

function trialBalanceOnWire(tb: TrialBalance & { logPosition: { commit: bigint; prepare: bigint } | null }, asOf: Date) {
  return {
    asOf: asOf.toISOString(),
    logPosition: tb.logPosition ? `${tb.logPosition.commit}/${tb.logPosition.prepare}` : null,
    currency: 'RUB',
    ledgers: tb.ledgers.map((l) => ({
      accountId: l.accountId,
      mode: l.mode,
      entries: l.entries,
      accounts: l.accounts.map((a) => ({
        account: a.account,
        type: (MERCHANT_ACCOUNTS as readonly string[]).includes(a.account) ? 'merchant' : 'system',
        debits: formatMoney(a.debits),
        credits: formatMoney(a.credits),
        balance: formatMoney(a.balance),
      })),
      debits: formatMoney(l.debits),
      credits: formatMoney(l.credits),
      balance: formatMoney(l.balance),
    })),
    totals: { entries: tb.entries, debits: formatMoney(tb.debits), credits: formatMoney(tb.credits), balance: formatMoney(tb.balance) },
    balanced: tb.balanced,
  };
}

function trialBalanceCsv(tb: TrialBalance): string {
  const lines = [csvRecord(['account_id', 'mode', 'account', 'debits', 'credits', 'balance'])];
  for (const l of tb.ledgers) {
    for (const a of l.accounts) lines.push(csvRecord([l.accountId, l.mode, a.account, formatMoney(a.debits), formatMoney(a.credits), formatMoney(a.balance)]));
    lines.push(csvRecord([l.accountId, l.mode, 'total', formatMoney(l.debits), formatMoney(l.credits), formatMoney(l.balance)]));
  }
  lines.push(csvRecord(['', '', 'total', formatMoney(tb.debits), formatMoney(tb.credits), formatMoney(tb.balance)]));
  return lines.join('');
}

const moneyRecord = (r: Readonly<Record<string, number>> | undefined) =>
  r ? Object.fromEntries(Object.entries(r).map(([k, v]) => [k, formatMoney(v)])) : undefined;

function reconciliationOnWire(report: ReconciliationReport) {
  return {
    from: report.from,
    to: report.to,
    checked: report.checked,
    differenceCount: report.differences.length,
    differences: report.differences.map((d) => ({
      kind: d.kind,
      flow: d.flow,
      flowId: d.flowId,
      accountId: d.accountId,
      mode: d.mode,
      entryId: d.entryId,
      cause: d.cause,
      ...(d.expected ? { expected: moneyRecord(d.expected) } : {}),
      ...(d.actual ? { actual: moneyRecord(d.actual) } : {}),
      detail: d.detail,
    })),
  };
}

function reconciliationCsv(report: ReconciliationReport): string {
  const lines = [csvRecord(['kind', 'flow', 'flow_id', 'account_id', 'mode', 'entry_id', 'cause', 'expected', 'actual', 'detail'])];
  const amounts = (r: Readonly<Record<string, number>> | undefined) =>
    r
      ? Object.entries(r)
          .map(([k, v]) => `${k}=${formatMoney(v)}`)
          .join(' ')
      : '';
  for (const d of report.differences)
    lines.push(csvRecord([d.kind, d.flow, d.flowId, d.accountId, d.mode, d.entryId, d.cause, amounts(d.expected), amounts(d.actual), d.detail]));
  return lines.join('');
}

/** Finance reports for the operator: statements, the trial balance, reconciliation. */
@Controller('admin/v1')
@UseGuards(AdminTokenGuard)
export class AuditReportsController {
  constructor(
    private readonly queries: QueryBus,
    @Inject(CLOCK_TOKEN) private readonly clock: Clock,
  ) {}

  /** A ledger's statement over (from, to]: opening, every entry with running balances, closing; JSON or CSV, streamed. */
  @ReadsModels('ledger')
  @Get('accounts/:id/statement')
  async statement(
    @Param('id') id: string,
    @Query(validRequest) query: AccountStatementQuery,
    @Headers('accept') accept: string | undefined,
    @Res() reply: FastifyReply,
  ) {
    const accountId = parseAccountId(id);
    const { from, to } = period(query.from, query.to);
    const now = this.clock.now();
    pastInstant(to, now, 'to', REPORT_PERIOD_NOT_ENDED);
    await postedThrough(this.queries, to, now, FOLLOWED.ledger, { accountId, mode: query.mode });
    const reader = await this.queries.execute(new GetAccountStatement({ accountId, mode: query.mode }, from, to));
    if (reader === null) throw ApiError.notFound('not_found', 'Аккаунт не найден');
    const csv = wantsCsv(query.format, accept);
    const head = { accountId, mode: query.mode, from: from.toISOString(), to: to.toISOString() };
    const body = Readable.from(loggedWhenCutOff(statementText(reader, head, csv), reply.log, { report: 'statement', accountId, mode: query.mode }), {
      objectMode: false,
    });
    void reply.status(200).header('content-type', csv ? CSV_CONTENT_TYPE : JSON_CONTENT_TYPE);
    if (csv) void reply.header('content-disposition', `attachment; filename="statement-${accountId}-${query.mode}-${fileStamp(from)}-${fileStamp(to)}.csv"`);
    return reply.send(body);
  }

  /** Every account of every ledger as of an instant, folded from the event log. */
  @ReadsModels('ledger')
  @Get('audit/trial-balance')
  async trialBalance(@Query(validRequest) query: TrialBalanceQuery, @Headers('accept') accept: string | undefined, @Res() reply: FastifyReply) {
    const now = this.clock.now();
    const asOf = query.asOf === undefined ? now : pastInstant(new Date(query.asOf), now, 'asOf', BALANCE_NOT_KNOWN_YET);
    if (query.asOf !== undefined) await postedThrough(this.queries, asOf, now, FOLLOWED.log);
    const tb = await this.queries.execute(new GetTrialBalance(asOf));
    if (wantsCsv(query.format, accept)) {
      return reply
        .status(200)
        .header('content-type', CSV_CONTENT_TYPE)
        .header('content-disposition', `attachment; filename="trial-balance-${fileStamp(asOf)}.csv"`)
        .send(trialBalanceCsv(tb));
    }
    return reply
      .status(200)
      .header('content-type', JSON_CONTENT_TYPE)
      .send(JSON.stringify(trialBalanceOnWire(tb, asOf)));
  }

  /** Flows of (from, to] against their ledger entries: every difference with its ids. */
  @ReadsModels('ledger', 'invoices', 'refunds', 'payouts')
  @Get('audit/reconciliation')
  async reconciliation(@Query(validRequest) query: ReconciliationQuery, @Headers('accept') accept: string | undefined, @Res() reply: FastifyReply) {
    const { from, to } = period(query.from, query.to);
    const now = this.clock.now();
    pastInstant(to, now, 'to', REPORT_PERIOD_NOT_ENDED);
    await postedThrough(this.queries, to, now, FOLLOWED.flows);
    const report = await this.queries.execute(new GetReconciliation(from, to));
    if (wantsCsv(query.format, accept)) {
      return reply
        .status(200)
        .header('content-type', CSV_CONTENT_TYPE)
        .header('content-disposition', `attachment; filename="reconciliation-${fileStamp(from)}-${fileStamp(to)}.csv"`)
        .send(reconciliationCsv(report));
    }
    return reply
      .status(200)
      .header('content-type', JSON_CONTENT_TYPE)
      .send(JSON.stringify(reconciliationOnWire(report)));
  }
}
