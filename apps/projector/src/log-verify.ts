import { loadConfigOrExit, openInfrastructure } from '#payments/composition';
import { COMMAND_SESSION_LIMITS } from '#platform/database';
import { verifyChainedLog, verifyEventLogInWorker } from '#event-store';
import { EventStoreDbEventStore } from '#event-store/eventstoredb';
import { createLogger } from '#platform/logging';
import { ProgressBar } from '#event-store/projections';
import { logReportLines } from './log-report';

const USAGE =
  'usage: npm run log:verify [-- --expect <position> <hash> ...]   (position commit/prepare, hash 64 hex digits, as GET /admin/v1/audit/checkpoint gave them)';

/** `--expect <position> <hash>` pairs: checkpoints recorded off-site that the log must reproduce. */
function expectedCheckpoints(args: readonly string[]): Map<string, string> {
  const expected = new Map<string, string>();
  for (let i = 0; i < args.length; i++) {
    const [flag, position, hash] = [args[i], args[i + 1], args[i + 2]];
    if (flag !== '--expect' || !position || !/^\d+\/\d+$/.test(position) || !hash || !/^[0-9a-fA-F]{64}$/.test(hash)) {
      process.stderr.write(`${USAGE}\n`);
      process.exit(2);
    }
    expected.set(position, hash);
    i += 2;
  }
  return expected;
}

/**
 * `npm run log:verify`: recomputes every stream's hash chain and the log's running hash
 * from the events table (on EventStoreDB: from the chain hashes in the events'
 * metadata; checkpoints are recorded only over the PostgreSQL table), compares them with the stream heads and the recorded
 * checkpoints (and with checkpoints recorded off-site, `--expect`), names the first
 * event whose data, order or presence changed, and exits 1 on any problem (0 when
 * everything holds, 2 when it could not run). Reads only: a read-only database role and
 * no secrets key are enough.
 */
async function main(): Promise<void> {
  const expected = expectedCheckpoints(process.argv.slice(2));
  const started = Date.now();
  const config = loadConfigOrExit('log:verify');
  const log = createLogger('log-verify', process.env.LOG_LEVEL ?? 'warn');
  const infra = await openInfrastructure(config, log, { applicationName: 'gateway-log-verify', limits: COMMAND_SESSION_LIMITS, access: 'read-only' });
  let failed = false;
  try {
    const bar = new ProgressBar('log:verify'.padEnd(16));
    const options = {
      at: [...expected.keys()],
      onProgress: (phase: 'streams' | 'log', events: number) => bar.update(phase === 'streams' ? 0.25 : 0.75, `${phase}: ${events} events read`),
    };
    // On EventStoreDB the chain hashes are in the events' metadata (docs/audit-log.md). On
    // PostgreSQL the chains are recomputed on a thread of their own (decision 0123).
    const report =
      infra.store instanceof EventStoreDbEventStore
        ? await verifyChainedLog(infra.store.chainedLog(), options)
        : await verifyEventLogInWorker(infra.pool, infra.databaseUrl, { applicationName: 'gateway-log-verify', readOnly: true, ...options });
    bar.update(1, `${report.events} events read`, true);
    const result = logReportLines(report, expected);
    failed = result.failed;
    result.lines.splice(2, 0, `read in ${((Date.now() - started) / 1000).toFixed(1)} s; peak RSS ${Math.round(process.resourceUsage().maxRSS / 1024)} MiB`);
    process.stdout.write(`${result.lines.join('\n')}\n`);
  } finally {
    await infra.close();
  }
  process.exit(failed ? 1 : 0);
}

main().catch((error) => {
  process.stderr.write(`log:verify failed to run: ${(error as Error).message}\n`);
  process.exit(2);
});
