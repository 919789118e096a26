import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { Controller, Get, Inject, Injectable, Param, Query, Res, UseGuards } from '@nestjs/common';
import { QueryBus } from '@nestjs/cqrs';
import type { FastifyReply } from 'fastify';
import { extendLogCheckpoints, logCheckpointAt, PostgresEventStore } from '#event-store';
import { RebuildState, rebuildStateSql, refuseRebuilt } from '#event-store/projections';
import { formatMoney, LedgerId, StatementBalances } from '#ledger';
import type { AccountBalances } from '#ledger';
import { AuditSigningKeys, canonicalJcs, GetAccountStatement, GetStatementInLog, movementTextsOf, StatementDisagreesWithLogError } from '#payments/audit';
import { LEDGER_MODEL } from '#payments/ledger';
import type { LedgerEntryRow } from '#payments/ledger';
import type { Infrastructure } from '#payments/composition';
import type { MerchantIdentity } from '#payments/merchants';
import { AdminTokenGuard } from '../../http/auth/admin-token.guard';
import { Merchant, MerchantAuthGuard } from '../../http/auth/merchant-auth.guard';
import { ApiError } from '../../http/errors/api-error';
import { ReadsModels } from '../../http/read-models';
import { HeavyRead } from '../../http/heavy-reads';
import { validRequest } from '../../http/request-pipe';
import { AUDIT_SIGNER, CLOCK_TOKEN, INFRASTRUCTURE } from '../../http/tokens';
import type { Clock } from '#platform/clock';
import { parseAccountId } from '../../ledger/ledger-audit.controller';
import { FOLLOWED, pastInstant, period, postedThrough, SIGNED_PERIOD_NOT_ENDED } from '../report-instants';
import { OperatorStatementQuery } from './signed-statement.request';
import { PeriodQuery } from '../audit-reports.request';
import { ReportBuilds, ReportRequest } from '../report-builds';

const buckets = (b: AccountBalances) => ({ pending: formatMoney(b.pending), available: formatMoney(b.available), reserved: formatMoney(b.reserved) });

/** The document's bytes, to send in this order (the movements are shared with the signed text, not copied). */
export interface SignedStatementText {
  readonly chunks: readonly Buffer[];
  readonly length: number;
}

const CLOSE = Buffer.from(']}');

/**
 * A ledger's statement over (from, to], signed (docs/audit-log.md): opening and closing
 * balance per bucket, every movement of the period, the log checkpoint at the last
 * entry of the ledger at or before `to`, and the gateway's Ed25519 signature over the
 * document without `signature` in canonical JSON (JCS). Nothing in it depends on when it
 * is asked for: a closed period's statement is the same bytes every time.
 *
 * A year's statement is hundreds of thousands of movements: each is written as canonical
 * text as its page arrives (a small step between reads), the movements kept as bytes, not
 * objects. `transactions` sorts last among the document's keys, so the canonical text is
 * the canonical head (the document with `transactions: []`, without its final `]}`), the
 * movements joined by commas, and `]}`: the unsigned text is signed once (off the event
 * loop) and the signed one is its signed head followed by the same movement bytes. It is
 * built in its turn (ReportBuilds), held until it is sent: what statements take at once is bounded.
 */
@Injectable()
export class SignedStatements {
  constructor(
    private readonly queries: QueryBus,
    @Inject(INFRASTRUCTURE) private readonly infrastructure: Infrastructure,
    @Inject(AUDIT_SIGNER) private readonly signer: AuditSigningKeys,
    @Inject(CLOCK_TOKEN) private readonly clock: Clock,
    private readonly builds: ReportBuilds,
  ) {}

  /**
   * The document as canonical JSON; null for an unknown account. A period that has not
   * ended is refused: its closing balance is not known yet, and would be signed. No turn
   * within the wait, a rebuild of the ledger read model, or a client that reset its
   * connection while it waited: 503, nothing built.
   */
  async statement(ledger: LedgerId, from: Date, to: Date, request: ReportRequest = {}): Promise<SignedStatementText | null> {
    const now = this.clock.now();
    pastInstant(to, now, 'to', SIGNED_PERIOD_NOT_ENDED);
    // Signed once final: the same period is the same bytes every time.
    await postedThrough(this.queries, to, now, FOLLOWED.ledger, ledger);
    // Built again once if it differs from the log: an entry appended between its two reads (the read model first) is not a fault.
    const built = () =>
      this.build(ledger, from, to).catch((error: unknown) =>
        error instanceof StatementDisagreesWithLogError ? this.build(ledger, from, to) : Promise.reject(error),
      );
    return this.builds.inTurn(request, { report: 'signed-statement', accountId: ledger.accountId, mode: ledger.mode }, built, ['ledger']);
  }

  private async build(ledger: LedgerId, from: Date, to: Date): Promise<SignedStatementText | null> {
    const reader = await this.queries.execute(new GetAccountStatement(ledger, from, to));
    if (reader === null) return null;
    const running = new StatementBalances(reader.opening);
    const movements = await movementTexts(reader.pages(), running);
    // Signed only as the log gives it: a wrong row of the read model signed once would stay validly signed.
    await this.checkAgainstLog(ledger, from, to, { opening: reader.opening, closing: running.closing(), movements });
    const document = {
      object: 'statement',
      accountId: ledger.accountId,
      mode: ledger.mode,
      currency: 'RUB',
      from: from.toISOString(),
      to: to.toISOString(),
      opening: buckets(reader.opening),
      closing: buckets(running.closing()),
      transactions: [] as never[],
      checkpoint: await this.checkpoint(ledger, to, reader.throughSeq, reader.rebuildState),
    };
    const head = headOf(document);
    const unsigned = Buffer.concat([head, ...movements.splice(0), CLOSE]);
    const signature = await this.signer.signBytes(unsigned);
    const signedHead = headOf({ ...document, signature });
    const rest = unsigned.subarray(head.length);
    return { chunks: [signedHead, rest], length: signedHead.length + rest.length };
  }

  /** The statement's balances and movements are the ledger's in the log (GetStatementInLog), else StatementDisagreesWithLogError: nothing signed. */
  private async checkAgainstLog(
    ledger: LedgerId,
    from: Date,
    to: Date,
    built: { readonly opening: AccountBalances; readonly closing: AccountBalances; readonly movements: readonly Buffer[] },
  ): Promise<void> {
    const inLog = await this.queries.execute(new GetStatementInLog(ledger, from, to));
    const digest = createHash('sha256');
    for (const chunk of built.movements) digest.update(chunk);
    const differs = (a: AccountBalances, b: AccountBalances) => canonicalJcs(buckets(a)) !== canonicalJcs(buckets(b));
    const what = [
      ...(differs(built.opening, inLog.opening) ? ['opening'] : []),
      ...(differs(built.closing, inLog.closing) ? ['closing'] : []),
      ...(digest.digest('hex') !== inLog.movementsDigest ? ['movements'] : []),
    ];
    if (what.length > 0) throw new StatementDisagreesWithLogError(ledger, what);
  }

  /** The log's checkpoint at the ledger's last entry at or before `to` (null: none, or a log without checkpoints: EventStoreDB). */
  private async checkpoint(ledger: LedgerId, to: Date, throughSeq: number, since: RebuildState) {
    const { pool, store } = this.infrastructure;
    if (!(store instanceof PostgresEventStore)) return null;
    // With the ledger's rebuild state (one row even when no entry is found): an entry missing from a ledger being
    // refilled would sign a statement naming no checkpoint.
    const last = (
      await pool.query<{ rebuild: RebuildState; log_position: string | null }>(
        `SELECT ${rebuildStateSql('$5')} AS rebuild, e.log_position FROM (SELECT) one LEFT JOIN LATERAL (
           SELECT log_position FROM ledger_entries WHERE account_id = $1 AND mode = $2 AND occurred_at <= $3 AND seq <= $4 ORDER BY seq DESC LIMIT 1
         ) e ON true`,
        [ledger.accountId, ledger.mode, to, throughSeq, LEDGER_MODEL],
      )
    ).rows[0]!;
    refuseRebuilt(LEDGER_MODEL, last.rebuild, since);
    if (last.log_position === null) return null;
    let c = await logCheckpointAt(pool, last.log_position);
    if (c === null) {
      await extendLogCheckpoints(pool);
      c = await logCheckpointAt(pool, last.log_position);
    }
    return c && { position: c.position, events: Number(c.events), hash: c.hash.toString('hex') };
  }
}

/**
 * The most movements (`transactions`) one signed statement holds. It is signed whole, so it
 * is held whole in memory (about 190 bytes a movement, twice while it is joined): without a
 * bound a merchant's statement from 2000 could take the API process's memory. Longer
 * periods are asked in parts; one part's closing balances are the next one's opening.
 */
export const MAX_STATEMENT_TRANSACTIONS = 500_000;

/**
 * The movements of the statement's entries as canonical text, comma-joined, a buffer a
 * page, applied to `running` as they come; refused (400 on `from`) past `max` movements.
 */
export async function movementTexts(
  pages: AsyncIterable<readonly LedgerEntryRow[]>,
  running: StatementBalances,
  max = MAX_STATEMENT_TRANSACTIONS,
): Promise<Buffer[]> {
  const movements: Buffer[] = [];
  let count = 0;
  for await (const page of pages) {
    const texts: string[] = [];
    for (const entry of page) {
      running.apply(entry.postings);
      texts.push(...movementTextsOf({ ...entry, occurredAt: entry.occurredAt.toISOString() }));
    }
    count += texts.length;
    if (count > max)
      throw ApiError.validation([{ param: 'from', code: 'too_many_transactions', message: `from: в периоде больше ${max} движений: запросите его частями` }]);
    if (texts.length > 0) movements.push(Buffer.from(`${movements.length > 0 ? ',' : ''}${texts.join(',')}`, 'utf8'));
  }
  return movements;
}

/** A document's canonical text without the `]}` that closes its (empty) `transactions`, the key that sorts last. */
function headOf<T extends { readonly transactions: readonly never[] }>(document: T): Buffer {
  const text = canonicalJcs(document);
  if (!text.endsWith('"transactions":[]}')) throw new Error('signed statement: `transactions` is not the last key of its canonical text');
  return Buffer.from(text.slice(0, -CLOSE.length), 'utf8');
}

/** Sent also to a client gone meanwhile (Fastify writes nothing then): the request is logged and counted once all the same. */
const send = (reply: FastifyReply, body: SignedStatementText | null) => {
  if (body === null) throw ApiError.notFound('not_found', 'Аккаунт не найден');
  return reply
    .status(200)
    .header('content-type', 'application/json; charset=utf-8')
    .header('content-length', body.length)
    .send(Readable.from(body.chunks, { objectMode: false }));
};

/**
 * The request's log, its response (the turn is held until it is sent), whether its
 * client reset the connection (a statement not yet built is then not built; a FIN alone
 * does not tell: half-open connections are answered, and REPORT_WAIT_SECONDS bounds the
 * wait), and the merchant account asking (none: the operator).
 */
const requestOf = (reply: FastifyReply, merchant?: string): ReportRequest => ({
  log: reply.request.log,
  response: reply.raw,
  incoming: reply.request.raw,
  gone: () => reply.request.raw.socket.destroyed,
  merchant,
});

/** The merchant's signed statement (its account, the key's mode), and the operator's of any account. */
@Controller()
export class SignedStatementController {
  constructor(private readonly statements: SignedStatements) {}

  @UseGuards(MerchantAuthGuard)
  @ReadsModels('ledger')
  @Get('v1/statements')
  @HeavyRead(PeriodQuery, (q, now) => pastInstant(period(q.from, q.to).to, now, 'to', SIGNED_PERIOD_NOT_ENDED))
  async merchant(@Merchant() merchant: MerchantIdentity, @Query(validRequest) query: PeriodQuery, @Res() reply: FastifyReply) {
    const { from, to } = period(query.from, query.to);
    const accountId = merchant.project.accountId;
    return send(reply, await this.statements.statement({ accountId, mode: merchant.mode }, from, to, requestOf(reply, accountId)));
  }

  @UseGuards(AdminTokenGuard)
  @ReadsModels('ledger')
  @Get('admin/v1/accounts/:id/signed-statement')
  async operator(@Param('id') id: string, @Query(validRequest) query: OperatorStatementQuery, @Res() reply: FastifyReply) {
    const accountId = parseAccountId(id);
    const { from, to } = period(query.from, query.to);
    return send(reply, await this.statements.statement({ accountId, mode: query.mode }, from, to, requestOf(reply)));
  }
}
