import { loadConfigOrExit, refuseArgumentsOrExit } from '#payments/composition';
import { openInfrastructure } from '#payments/composition';
import { COMMAND_SESSION_LIMITS, outcomeDecided } from '#platform/database';
import { ledgerEntriesOf, verifyFlowReadModels, verifyLedgers, VerifyReport } from '#payments/ledger-verification';
import { createLogger } from '#platform/logging';
import { ProgressBar } from '#event-store/projections';
import { EventLogReport, verifyChainedLog, verifyEventLogInWorker } from '#event-store';
import { LEDGER_CATEGORY } from '#ledger';
import type { EventStoreDbEventStore } from '#event-store/eventstoredb';
import { logReportLines } from './log-report';

/**
 * `npm run ledger:verify`: replays every ledger from the event log, checks every
 * invariant, compares the rebuilt balances with the read model and the invoices, refunds
 * and payouts read models with the log folded again, recomputes the event
 * log's hash chains (as log:verify does, on the PostgreSQL store), prints a report and
 * exits 1 on any difference (0 when everything agrees, 2 when it could not run or a flow
 * read model was not compared: being rebuilt, or its check failed). Reads
 * only: a read-only database role and no secrets key are enough.
 */
async function main(): Promise<void> {
  const started = Date.now();
  refuseArgumentsOrExit('ledger:verify');
  const config = loadConfigOrExit('ledger:verify');
  const log = createLogger('ledger-verify', config.logLevel ?? 'warn');
  const infra = await openInfrastructure(config, log, { applicationName: 'gateway-ledger-verify', limits: COMMAND_SESSION_LIMITS, access: 'read-only' });
  let failed = false;
  let exitCode = 0;
  try {
    const bar = new ProgressBar('ledger:verify'.padEnd(16));
    const esdb = config.eventStore === 'eventstoredb' ? (infra.store as EventStoreDbEventStore) : null;
    const onProgress = (events: number, fraction: number) => bar.update(fraction, `${events} events read`);
    // The flows reconciliation reads beside the ledger entries, checked against the log too, meanwhile.
    const flowsChecked = verifyFlowReadModels(infra.pool, infra.store, { logHere: !esdb });
    flowsChecked.catch(() => undefined);
    let report: VerifyReport;
    let chainsChecked: Promise<EventLogReport>;
    if (esdb) {
      // The ledgers and the log's chains are checked at once.
      chainsChecked = verifyChainedLog(esdb.chainedLog());
      chainsChecked.catch(() => undefined);
      report = await verifyLedgers(infra.pool, infra.store, { onProgress });
    } else {
      // One read of the log, on a thread of its own, recomputes the chains and hands the
      // ledger events on to this thread, which replays every ledger from them (decision 0123).
      let verified: Promise<EventLogReport> | null = null;
      report = await verifyLedgers(infra.pool, infra.store, {
        onProgress,
        inLogOrder: {
          follow: (upTo, feed) => {
            verified = verifyEventLogInWorker(infra.pool, infra.databaseUrl, {
              applicationName: 'gateway-ledger-verify',
              readOnly: true,
              upTo,
              forward: {
                streamNamePrefix: `${LEDGER_CATEGORY}-`,
                eventType: 'LedgerEntryPosted',
                onEvents: (events) => feed(ledgerEntriesOf(events)),
              },
            });
            return verified.then(() => undefined);
          },
        },
      });
      if (verified === null) throw new Error('the log was not read');
      chainsChecked = verified;
    }
    bar.update(1, `${report.eventsRead} events read`, true);
    const chains = logReportLines(await chainsChecked);
    // A flow check that could not run leaves the ledger's and the chains' verdict standing, and the run unverified (exit 2).
    const flows = await flowsChecked.catch((error: unknown) => error as Error);
    const flowProblems = flows instanceof Error ? [] : flows.problems;
    const problems = [
      ...report.problems.map((p) => `[${p.kind}] ${p.ledger}: ${p.detail}`),
      ...flowProblems.map((p) => `[${p.kind}] ${p.table} ${p.id}: ${p.detail}`),
    ];
    const unverified =
      flows instanceof Error
        ? `the flows (invoices, refunds, payouts) could not be compared with the log: ${flows.message}`
        : flows.notCompared.length > 0
          ? `the ${flows.notCompared.join(', ')} read model(s) are being rebuilt, so not compared: run projections:rebuild, then ledger:verify`
          : null;
    const out: string[] = [
      `ledgers: ${report.ledgers}, journal entries: ${report.entries}, events read: ${report.eventsRead}, snapshots compared: ${report.snapshotsChecked}`,
      ...(flows instanceof Error
        ? []
        : [`flows compared with the log: ${flows.rows.invoices} invoices, ${flows.rows.refunds} refunds, ${flows.rows.payouts} payouts`]),
      `read in ${((Date.now() - started) / 1000).toFixed(1)} s; peak RSS ${Math.round(process.resourceUsage().maxRSS / 1024)} MiB`,
      ...report.notes.map((n) => `note: ${n}`),
    ];
    if (problems.length === 0 && unverified !== null) {
      out.push(`NOT VERIFIED: ${unverified}`);
    } else if (problems.length === 0) {
      out.push('OK: every entry balances, no merchant account below zero, all accounts sum to zero,');
      out.push('    no cause posted twice, every stored snapshot equals its ledger re-folded from the log,');
      out.push('    and the read models (ledgers, invoices, refunds, payouts) equal the log replayed.');
    } else {
      failed = true;
      out.push(`FAILED: ${problems.length} problem(s)`);
      for (const p of problems.slice(0, 50)) out.push(`  ${p}`);
      if (problems.length > 50) out.push(`  … and ${problems.length - 50} more`);
      if (unverified !== null) out.push(`  and ${unverified}`);
    }
    failed ||= chains.failed;
    out.push(...chains.lines);
    process.stdout.write(`${out.join('\n')}\n`);
    const code = failed ? 1 : unverified !== null ? 2 : 0;
    outcomeDecided(code); // the verdict is printed: a Ctrl-C while it closes does not change it
    exitCode = code;
  } finally {
    await infra.close();
  }
  process.exit(exitCode);
}

main().catch((error) => {
  process.stderr.write(`ledger:verify failed to run: ${(error as Error).message}\n`);
  process.exit(2);
});
