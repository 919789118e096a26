import { Controller, Get, Inject, Injectable, Param, Query, Res, UseGuards } from '@nestjs/common';
import { QueryBus } from '@nestjs/cqrs';
import type { FastifyReply } from 'fastify';
import { extendLogCheckpoints, logCheckpointAt, PostgresEventStore } from '#event-store';
import { balanceMovementsOf, formatMoney, LedgerId, StatementBalances } from '#ledger';
import type { AccountBalances } from '#ledger';
import { AuditSigningKeys, canonicalJcs, GetAccountStatement } from '#payments/audit';
import type { Infrastructure } from '#payments/composition';
import type { MerchantIdentity } from '#payments/merchants';
import { AdminTokenGuard } from '../../http/auth/admin-token.guard';
import { Merchant, MerchantAuthGuard } from '../../http/auth/merchant-auth.guard';
import { ApiError } from '../../http/errors/api-error';
import { ReadsModels } from '../../http/read-models';
import { validRequest } from '../../http/request-pipe';
import { AUDIT_SIGNER, CLOCK_TOKEN, INFRASTRUCTURE } from '../../http/tokens';
import type { Clock } from '#platform/clock';
import { parseAccountId } from '../../ledger/ledger-audit.controller';
import { FOLLOWED, pastInstant, period, postedThrough, SIGNED_PERIOD_NOT_ENDED } from '../report-instants';
import { OperatorStatementQuery } from './signed-statement.request';
import { PeriodQuery } from '../audit-reports.request';

const buckets = (b: AccountBalances) => ({ pending: formatMoney(b.pending), available: formatMoney(b.available), reserved: formatMoney(b.reserved) });

/**
 * A ledger's statement over (from, to], signed (docs/audit-log.md): opening and closing
 * balance per bucket, every movement of the period, the log checkpoint at the last
 * entry of the ledger at or before `to`, and the gateway's Ed25519 signature over the
 * document without `signature` in canonical JSON (JCS). Nothing in it depends on when it
 * is asked for: a closed period's statement is the same bytes every time.
 */
@Injectable()
export class SignedStatements {
  constructor(
    private readonly queries: QueryBus,
    @Inject(INFRASTRUCTURE) private readonly infrastructure: Infrastructure,
    @Inject(AUDIT_SIGNER) private readonly signer: AuditSigningKeys,
    @Inject(CLOCK_TOKEN) private readonly clock: Clock,
  ) {}

  /**
   * The document as canonical JSON; null for an unknown account. A period that has not
   * ended is refused: its closing balance is not known yet, and would be signed.
   */
  async statement(ledger: LedgerId, from: Date, to: Date): Promise<string | null> {
    const now = this.clock.now();
    pastInstant(to, now, 'to', SIGNED_PERIOD_NOT_ENDED);
    // Signed once final: the same period is the same bytes every time.
    await postedThrough(this.queries, to, now, FOLLOWED.ledger, ledger);
    const reader = await this.queries.execute(new GetAccountStatement(ledger, from, to));
    if (reader === null) return null;
    const running = new StatementBalances(reader.opening);
    const transactions = [];
    for await (const page of reader.pages()) {
      for (const entry of page) {
        running.apply(entry.postings);
        for (const m of balanceMovementsOf({ ...entry, occurredAt: entry.occurredAt.toISOString() }))
          transactions.push({ ...m, amount: formatMoney(m.amount) });
      }
    }
    const document = {
      object: 'statement',
      accountId: ledger.accountId,
      mode: ledger.mode,
      currency: 'RUB',
      from: from.toISOString(),
      to: to.toISOString(),
      opening: buckets(reader.opening),
      closing: buckets(running.closing()),
      transactions,
      checkpoint: await this.checkpoint(ledger, to, reader.throughSeq),
    };
    return canonicalJcs({ ...document, signature: await this.signer.sign(canonicalJcs(document)) });
  }

  /** The log's checkpoint at the ledger's last entry at or before `to` (null: none, or a log without checkpoints: EventStoreDB). */
  private async checkpoint(ledger: LedgerId, to: Date, throughSeq: number) {
    const { pool, store } = this.infrastructure;
    if (!(store instanceof PostgresEventStore)) return null;
    const last = (
      await pool.query<{ log_position: string }>(
        'SELECT log_position FROM ledger_entries WHERE account_id = $1 AND mode = $2 AND occurred_at <= $3 AND seq <= $4 ORDER BY seq DESC LIMIT 1',
        [ledger.accountId, ledger.mode, to, throughSeq],
      )
    ).rows[0];
    if (!last) return null;
    let c = await logCheckpointAt(pool, last.log_position);
    if (c === null) {
      await extendLogCheckpoints(pool);
      c = await logCheckpointAt(pool, last.log_position);
    }
    return c && { position: c.position, events: Number(c.events), hash: c.hash.toString('hex') };
  }
}

const send = (reply: FastifyReply, body: string | null) => {
  if (body === null) throw ApiError.notFound('not_found', 'Аккаунт не найден');
  return reply.status(200).header('content-type', 'application/json; charset=utf-8').send(body);
};

/** The merchant's signed statement (its account, the key's mode), and the operator's of any account. */
@Controller()
export class SignedStatementController {
  constructor(private readonly statements: SignedStatements) {}

  @UseGuards(MerchantAuthGuard)
  @ReadsModels('ledger')
  @Get('v1/statements')
  async merchant(@Merchant() merchant: MerchantIdentity, @Query(validRequest) query: PeriodQuery, @Res() reply: FastifyReply) {
    const { from, to } = period(query.from, query.to);
    return send(reply, await this.statements.statement({ accountId: merchant.project.accountId, mode: merchant.mode }, from, to));
  }

  @UseGuards(AdminTokenGuard)
  @ReadsModels('ledger')
  @Get('admin/v1/accounts/:id/signed-statement')
  async operator(@Param('id') id: string, @Query(validRequest) query: OperatorStatementQuery, @Res() reply: FastifyReply) {
    const accountId = parseAccountId(id);
    const { from, to } = period(query.from, query.to);
    return send(reply, await this.statements.statement({ accountId, mode: query.mode }, from, to));
  }
}
