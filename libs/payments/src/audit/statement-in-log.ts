import { createHash } from 'node:crypto';
import { Inject } from '@nestjs/common';
import { IQueryHandler, Query, QueryHandler } from '@nestjs/cqrs';
import { AccountBalances, BalancesAsOfFold, balanceMovementsOf, formatMoney, LedgerId } from '#ledger';
import type { Kopecks } from '#ledger';
import { LedgerBook } from '../ledger';
import { canonicalJcs } from './signing-keys';

/** An entry as a statement shows it: its movements' canonical text, in order (the items of `transactions`). */
export function movementTextsOf(entry: {
  readonly entryId: string;
  readonly kind: string;
  readonly cause: string;
  readonly occurredAt: string;
  readonly postings: readonly { readonly account: string; readonly amount: Kopecks }[];
}): string[] {
  return balanceMovementsOf(entry).map((m) => canonicalJcs({ ...m, amount: formatMoney(m.amount) }));
}

/** A statement's figures as the log gives them: the balances as of `from` and `to`, and its movements' text, hashed. */
export interface StatementInLog {
  readonly opening: AccountBalances;
  readonly closing: AccountBalances;
  /** SHA-256 (hex) of the movements' canonical text joined by commas, in the ledger's order: a signed statement's `transactions` without its brackets. */
  readonly movementsDigest: string;
}

/**
 * Audit: the statement of a ledger over (from, to] folded from its stream in the log,
 * read to its end a page at a time (an entry's time is its cause's: log order says
 * nothing of time), to check the read model's before it is signed.
 */
export class GetStatementInLog extends Query<StatementInLog> {
  constructor(
    readonly ledger: LedgerId,
    readonly from: Date,
    readonly to: Date,
  ) {
    super();
  }
}

@QueryHandler(GetStatementInLog)
export class GetStatementInLogHandler implements IQueryHandler<GetStatementInLog> {
  constructor(@Inject(LedgerBook) private readonly ledgers: LedgerBook) {}

  async execute({ ledger, from, to }: GetStatementInLog): Promise<StatementInLog> {
    const [opening, closing] = [new BalancesAsOfFold(from), new BalancesAsOfFold(to)];
    const digest = createHash('sha256');
    let first = true;
    await this.ledgers.forEachEntry(ledger, (entry) => {
      opening.apply(entry);
      closing.apply(entry);
      const occurredAt = new Date(entry.occurredAt);
      if (occurredAt > from && occurredAt <= to) {
        for (const text of movementTextsOf({ ...entry, occurredAt: occurredAt.toISOString() })) {
          digest.update(first ? text : `,${text}`);
          first = false;
        }
      }
      return true;
    });
    return { opening: opening.result().balances, closing: closing.result().balances, movementsDigest: digest.digest('hex') };
  }
}

/** The read model's statement differs from the log's: not signed (docs/audit-log.md, "Signed statements"). */
export class StatementDisagreesWithLogError extends Error {
  constructor(ledger: LedgerId, what: readonly string[]) {
    super(`statement of ${ledger.mode}_${ledger.accountId}: the ledger read model's ${what.join(', ')} differ from the log's; not signed (run ledger:verify)`);
    this.name = 'StatementDisagreesWithLogError';
  }
}
