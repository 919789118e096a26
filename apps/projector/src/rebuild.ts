import { loadConfigOrExit } from '#payments/composition';
import { openInfrastructure } from '#payments/composition';
import { COMMAND_SESSION_LIMITS } from '#platform/database';
import { createLogger } from '#platform/logging';
import { ProgressBar, rebuildProjectionsTogether } from '#event-store/projections';
import { allProjections } from '#payments/read-models';

/**
 * `npm run projections:rebuild [name...] [--batch-size N]`: empties the named read
 * models (all when none is named) and rebuilds them from position zero of the log,
 * reading the log once for all of them (pages of N events, default 10000), with a
 * progress bar. Safe to interrupt: run it again, or start the projector, and the
 * rebuild goes on from each projection's last committed batch.
 */
async function main(): Promise<void> {
  const args = process.argv.slice(2);
  let batchSize: number | undefined;
  const names: string[] = [];
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--batch-size') {
      batchSize = Number(args[++i]);
      if (!Number.isInteger(batchSize) || batchSize < 1 || batchSize > 50_000) fail('--batch-size takes an integer from 1 to 50000');
    } else if (args[i]!.startsWith('-')) {
      fail(`unknown option ${args[i]}`);
    } else {
      names.push(args[i]!);
    }
  }
  const known = new Map(allProjections.map((p) => [p.name, p]));
  const unknown = names.filter((n) => !known.has(n));
  if (unknown.length > 0) fail(`unknown projection ${unknown.join(', ')}; known: ${[...known.keys()].join(', ')}`);
  const selected = names.length > 0 ? [...new Set(names)].map((n) => known.get(n)!) : [...allProjections];

  const config = loadConfigOrExit('projections:rebuild');
  const log = createLogger('projections-rebuild', process.env.LOG_LEVEL ?? 'warn');
  const infra = await openInfrastructure(config, log, { applicationName: 'gateway-rebuild', limits: COMMAND_SESSION_LIMITS });
  try {
    const bar = new ProgressBar('projections'.padEnd(16));
    const progress = new Map<string, { applied: bigint; fraction: number }>();
    const result = await rebuildProjectionsTogether(infra.pool, infra.store, selected, {
      batchSize,
      log,
      onProgress: (p) => {
        progress.set(p.projection, { applied: p.eventsApplied, fraction: p.fraction });
        const fraction = Math.min(...selected.map((s) => progress.get(s.name)?.fraction ?? 0));
        const applied = [...progress.values()].reduce((sum, x) => sum + x.applied, 0n);
        const rate = Number(applied) / Math.max(bar.elapsedSeconds(), 0.001);
        bar.update(fraction, `${applied} events applied, ${Math.round(rate)} events/s`);
      },
    });
    bar.update(1, 'done', true);
    for (const r of result.projections) {
      const rate = Number(r.eventsApplied) / Math.max(r.seconds, 0.001);
      const how = r.followed ? ' (by the running projector)' : `, ${r.applySeconds.toFixed(1)} s in its batches`;
      process.stdout.write(`rebuilt ${r.projection}: ${r.eventsApplied} events in ${r.seconds.toFixed(1)} s (${Math.round(rate)} events/s${how})\n`);
    }
    const logRate = result.logEventsRead / Math.max(result.seconds, 0.001);
    process.stdout.write(
      `read the log once: ${result.logEventsRead} events in ${result.seconds.toFixed(1)} s (${Math.round(logRate)} log events/s, ${result.readWaitSeconds.toFixed(1)} s waiting for pages); peak RSS ${peakRssMiB()} MiB\n`,
    );
    process.stdout.write(
      throughputSummary(
        result.projections.map((r) => ({ name: r.projection, eventsApplied: r.eventsApplied, seconds: r.seconds })),
        result.seconds,
      ),
    );
  } finally {
    await infra.close();
  }
}

/** The largest resident set of this process so far, in MiB. */
function peakRssMiB(): number {
  return Math.round(process.resourceUsage().maxRSS / 1024);
}

/**
 * The throughput of each projection's rebuild (events it applied per second, up to its
 * last batch), and of the whole run (every event applied, over the run's seconds).
 */
function throughputSummary(results: readonly { name: string; eventsApplied: bigint; seconds: number }[], seconds: number): string {
  const rate = (events: bigint, seconds: number) => String(Math.round(Number(events) / Math.max(seconds, 0.001)));
  const total = { events: results.reduce((sum, r) => sum + r.eventsApplied, 0n), seconds };
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
