import { loadConfigOrExit } from '#payments/composition';
import { openInfrastructure } from '#payments/composition';
import { COMMAND_SESSION_LIMITS } from '#platform/database';
import { createLogger } from '#platform/logging';
import { ProgressBar, rebuildProjection } from '#event-store/projections';
import { allProjections } from '#payments/read-models';

/**
 * `npm run projections:rebuild [name...] [--batch-size N]`: empties the named read
 * models (all when none is named) and rebuilds them from position zero of the log,
 * with a progress bar. Safe to interrupt: run it again, or start the projector, and
 * the rebuild goes on from its last committed batch.
 */
async function main(): Promise<void> {
  const args = process.argv.slice(2);
  let batchSize: number | undefined;
  const names: string[] = [];
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--batch-size') {
      batchSize = Number(args[++i]);
      if (!Number.isInteger(batchSize) || batchSize < 1 || batchSize > 10_000) fail('--batch-size takes an integer from 1 to 10000');
    } else if (args[i]!.startsWith('-')) {
      fail(`unknown option ${args[i]}`);
    } else {
      names.push(args[i]!);
    }
  }
  const known = new Map(allProjections.map((p) => [p.name, p]));
  const unknown = names.filter((n) => !known.has(n));
  if (unknown.length > 0) fail(`unknown projection ${unknown.join(', ')}; known: ${[...known.keys()].join(', ')}`);
  const selected = names.length > 0 ? names.map((n) => known.get(n)!) : [...allProjections];

  const config = loadConfigOrExit('projections:rebuild');
  const log = createLogger('projections-rebuild', process.env.LOG_LEVEL ?? 'warn');
  const infra = await openInfrastructure(config, log, { applicationName: 'gateway-rebuild', limits: COMMAND_SESSION_LIMITS });
  try {
    const results: { name: string; eventsApplied: bigint; seconds: number }[] = [];
    for (const projection of selected) {
      const bar = new ProgressBar(projection.name.padEnd(24));
      const result = await rebuildProjection(infra.pool, infra.store, projection, {
        batchSize,
        log,
        onProgress: (p) => {
          const rate = Number(p.eventsApplied) / Math.max(bar.elapsedSeconds(), 0.001);
          bar.update(p.fraction, `${p.eventsApplied} events, ${Math.round(rate)} events/s`, p.done);
        },
      });
      const rate = Number(result.eventsApplied) / Math.max(result.seconds, 0.001);
      process.stdout.write(`rebuilt ${projection.name}: ${result.eventsApplied} events in ${result.seconds.toFixed(1)} s (${Math.round(rate)} events/s)\n`);
      results.push({ name: projection.name, ...result });
    }
    process.stdout.write(throughputSummary(results));
  } finally {
    await infra.close();
  }
}

/** The throughput of each projection's rebuild (events it applied per second), and of the whole run. */
function throughputSummary(results: readonly { name: string; eventsApplied: bigint; seconds: number }[]): string {
  const rate = (events: bigint, seconds: number) => String(Math.round(Number(events) / Math.max(seconds, 0.001)));
  const total = results.reduce((sum, r) => ({ events: sum.events + r.eventsApplied, seconds: sum.seconds + r.seconds }), { events: 0n, seconds: 0 });
  const rows = [
    ['projection', 'events', 'seconds', 'events/s'],
    ...results.map((r) => [r.name, String(r.eventsApplied), r.seconds.toFixed(1), rate(r.eventsApplied, r.seconds)]),
    ['all', String(total.events), total.seconds.toFixed(1), rate(total.events, total.seconds)],
  ];
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((row) => row[i]!.length)));
  const lines = rows.map((row) => row.map((cell, i) => (i === 0 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!))).join('  '));
  return `\nthroughput:\n${lines.map((l) => `  ${l}`).join('\n')}\n`;
}

function fail(message: string): never {
  process.stderr.write(`projections:rebuild: ${message}\n`);
  process.exit(2);
}

main().catch((error) => {
  process.stderr.write(`projections:rebuild failed: ${(error as Error).message}\n`);
  process.exit(1);
});
