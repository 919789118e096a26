import { StatementBalances, zeroAccountBalances } from '#ledger';
import type { LedgerEntryRow } from '#payments/ledger';
import { ApiError } from '../../http/errors/api-error';
import { movementTexts } from './signed-statement.controller';

/** A held payment of `amount` kopecks: one movement (pending), its fee and clearing left out as system accounts. */
const payment = (n: number, amount: number): LedgerEntryRow => ({
  entryId: `entry-${n}`,
  seq: n,
  kind: 'payment_recorded',
  cause: `payment:inv-${n}`,
  occurredAt: new Date(Date.UTC(2025, 0, 1, 0, n)),
  logPosition: `0/${n}`,
  postings: [
    { account: 'pending', amount },
    { account: 'acquiring_clearing', amount: -amount },
  ],
});

async function* pagesOf(...pages: LedgerEntryRow[][]): AsyncGenerator<readonly LedgerEntryRow[]> {
  for (const page of pages) yield page;
}

describe("a signed statement's movements", () => {
  it('are the canonical texts of the postings to the buckets, joined by commas across pages, up to the bound', async () => {
    const running = new StatementBalances(zeroAccountBalances());
    const texts = await movementTexts(pagesOf([payment(1, 100), payment(2, 250)], [], [payment(3, 5)]), running, 3);
    const json = JSON.parse(`[${Buffer.concat(texts).toString('utf8')}]`) as { cause: string; amount: string }[];
    expect(json.map((m) => [m.cause, m.amount])).toEqual([
      ['payment:inv-1', '1.00'],
      ['payment:inv-2', '2.50'],
      ['payment:inv-3', '0.05'],
    ]);
    expect(running.closing().pending).toBe(355);
  });

  it('past the bound: refused, 400 validation on `from` (a statement is held whole to be signed, so a period from 2000 took the memory of the API)', async () => {
    const refusal = await movementTexts(
      pagesOf([payment(1, 100), payment(2, 250)], [payment(3, 5), payment(4, 7)]),
      new StatementBalances(zeroAccountBalances()),
      3,
    ).catch((e: unknown) => e);
    expect(refusal).toBeInstanceOf(ApiError);
    expect((refusal as ApiError).status).toBe(400);
    expect((refusal as ApiError).body()).toEqual({
      error: {
        code: 'validation',
        param: 'from',
        message: 'from: в периоде больше 3 движений: запросите его частями',
        details: [{ param: 'from', code: 'too_many_transactions', message: 'from: в периоде больше 3 движений: запросите его частями' }],
      },
    });
  });
});
