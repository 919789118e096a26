import type { Pool } from 'pg';
import { EventStore, verifyEventLog } from '#event-store';
import { LEDGER_CATEGORY } from '#ledger';
import { ledgerEntriesOf, verifyLedgers, VerifyReport } from '#payments/ledger-verification';

/**
 * verifyLedgers fed from one read of the log in log order, as ledger:verify runs it on
 * PostgreSQL (decision 0123), here on the test's thread (ledger:verify reads on a worker
 * thread, which runs only from dist/): small pages, so that a ledger's entries arrive in
 * several.
 */
export function verifyLedgersInLogOrder(pool: Pool, store: EventStore): Promise<VerifyReport> {
  return verifyLedgers(pool, store, {
    inLogOrder: {
      follow: async (upTo, feed) => {
        await verifyEventLog(pool, {
          upTo,
          pageSize: 2,
          forward: {
            streamNamePrefix: `${LEDGER_CATEGORY}-`,
            eventType: 'LedgerEntryPosted',
            onEvents: (events) => feed(ledgerEntriesOf(events)),
          },
        });
      },
    },
  });
}
