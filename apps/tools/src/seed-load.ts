import { parseArgs } from 'node:util';
import { couldNotRun, loadConfigOrExit, openInfrastructure } from '#payments/composition';
import { COMMAND_SESSION_LIMITS, outcomeDecided } from '#platform/database';
import { createLogger } from '#platform/logging';
import { calendarInstantProblem } from '#platform/clock';
import { ProgressBar } from '#event-store/projections';
import { DEFAULT_SEED, DEFAULT_START, seedLoad, SeedRefusedError } from './seed/seed-load';

const USAGE = `usage: npm run seed:load -- [--events N] [--seed S] [--start ISO-8601] [--days N] [--merchants N]
  --events     about how many events to write (default 100000)
  --seed       the same seed writes the same history (default ${DEFAULT_SEED}); ids handed out by the database differ
  --start      simulated time of the first invoice (default ${DEFAULT_START.toISOString()})
  --days       simulated days the invoices are spread over (default 30)
  --merchants  merchant accounts (default one per 2500 events, 3 to 400)`;

/**
 * `npm run seed:load -- --events 1000000`: writes a realistic history of many
 * merchants (invoices paid, failed, expired; refunds; payouts; the ledger entries
 * they cause) into the configured database (DATABASE_URL, or the embedded
 * PostgreSQL under DATA_DIR), with a progress bar, and prints events/s at the end.
 * Run it with the gateway's projector stopped; start the projector afterwards (or
 * run projections:rebuild) to build the read models, then ledger:verify. The
 * reactors and the webhook outbox are left at the head of the history it wrote.
 */
async function main(): Promise<void> {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: process.argv.slice(2),
      options: {
        events: { type: 'string' },
        seed: { type: 'string' },
        start: { type: 'string' },
        days: { type: 'string' },
        merchants: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (error) {
    fail((error as Error).message);
  }
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return;
  }
  const events = positiveInteger('events', values.events, 100_000);
  const days = positiveInteger('days', values.days, 30);
  const merchants = values.merchants === undefined ? undefined : positiveInteger('merchants', values.merchants, 1);
  const seed = typeof values.seed === 'string' ? values.seed : DEFAULT_SEED;
  let start = DEFAULT_START;
  if (typeof values.start === 'string') {
    if (calendarInstantProblem(values.start) !== null) {
      fail(`--start takes an ISO 8601 instant of a real date and time in the years 0000..9999 (UTC) such as ${DEFAULT_START.toISOString()}`);
    }
    start = new Date(values.start);
  }

  const config = loadConfigOrExit('seed:load');
  const log = createLogger('seed-load', config.logLevel ?? 'warn');
  const infra = await openInfrastructure(config, log, { applicationName: 'gateway-seed-load', limits: COMMAND_SESSION_LIMITS });
  try {
    process.stderr.write(`seed:load: about ${events} events, seed ${JSON.stringify(seed)}, from ${start.toISOString()} over ${days} simulated days\n`);
    const bar = new ProgressBar('seed:load'.padEnd(12));
    const result = await seedLoad(
      {
        pool: infra.pool,
        store: infra.store,
        terms: config,
        secrets: infra.secrets,
        clock: infra.clock,
        webhookRetentionDays: config.webhookRetentionDays,
      },
      {
        events,
        seed,
        start,
        days,
        merchants,
        onProgress: (p) => {
          if (!p.done && p.fraction >= 1) return; // the last line comes with done
          const rate = p.eventsWritten / Math.max(bar.elapsedSeconds(), 0.001);
          bar.update(p.fraction, `${p.eventsWritten} events, ${Math.round(rate)} events/s`, p.done);
        },
      },
    );
    outcomeDecided(0); // the history is written: a Ctrl-C from here on does not make it "interrupted"
    const c = (key: string) => result.counts[key] ?? 0;
    const payoutRefusals = Object.entries(result.counts)
      .filter(([k]) => k.startsWith('PayoutRefused:'))
      .map(([k, n]) => `${k.slice('PayoutRefused:'.length)} ${n}`)
      .join(', ');
    // Reserved and not settled by the end of the history (pending, approved, processing): listed so that the parts add up.
    const openPayouts = c('PayoutReserved') - c('PayoutPaid') - c('PayoutRejected') - c('PayoutCancelled');
    const lines = [
      `seeded ${result.eventsWritten} events in ${result.appends} appends in ${result.seconds.toFixed(1)} s (${Math.round(result.eventsWritten / Math.max(result.seconds, 0.001))} events/s)`,
      `  merchants ${result.merchants}, projects ${result.projects}; simulated ${result.from.toISOString()} to ${result.until.toISOString()}`,
      `  invoices ${c('InvoiceCreated')}: paid ${c('InvoicePaid')}, failed ${c('InvoiceFailed')}, expired ${c('InvoiceExpired')}`,
      `  refunds requested ${c('InvoiceRefundRequested')}: succeeded ${c('RefundSucceeded')}, failed ${c('RefundFailed')}, refused for want of balance ${c('RefundRefused')}`,
      `  payouts requested ${c('PayoutRequested')}: reserved ${c('PayoutReserved')} (paid ${c('PayoutPaid')}, rejected ${c('PayoutRejected')}, cancelled ${c('PayoutCancelled')}, still open ${openPayouts}), refused ${c('PayoutRefused')}${payoutRefusals ? ` (${payoutRefusals})` : ''}`,
      `  ledger entries ${c('LedgerEntryPosted')}`,
      `  at the head of the history (nothing to re-derive): ${result.followers.atHead.join(', ') || 'none'}`,
      ...(result.followers.toCatchUp.length > 0 ? [`  left to catch up on the log: ${result.followers.toCatchUp.join(', ')}`] : []),
    ];
    process.stdout.write(`${lines.join('\n')}\n`);
  } finally {
    await infra.close();
  }
}

function positiveInteger(name: string, raw: string | boolean | undefined, fallback: number): number {
  if (raw === undefined) return fallback;
  const n = typeof raw === 'string' && /^\d+$/.test(raw) ? Number(raw) : NaN;
  if (!Number.isSafeInteger(n) || n < 1) fail(`--${name} takes a positive integer`);
  return n;
}

function fail(message: string): never {
  process.stderr.write(`seed:load: ${message}\n${USAGE}\n`);
  process.exit(2);
}

main().catch((error) => {
  if (error instanceof SeedRefusedError) {
    process.stderr.write(`\nseed:load: ${error.message}\n`);
    process.exit(2);
  }
  process.stderr.write(`seed:load failed: ${(error as Error).message}\n`);
  process.exit(couldNotRun(error) ? 2 : 1);
});
