import path from 'node:path';
import { Worker } from 'node:worker_threads';
import { comparePositions, Position, visibleLogEvents } from '#event-store';
import { couldNotRun, InfrastructureWithoutSecrets, loadConfigOrExit, openInfrastructure, servingSessions, usageOnHelp } from '#payments/composition';
import { COMMAND_SESSION_LIMITS, NoEmbeddedDatabaseError, outcomeDecided } from '#platform/database';
import { createLogger, Logger } from '#platform/logging';
import {
  announceRebuild,
  HeldProjectionLocks,
  ProgressBar,
  Projection,
  ProjectionHeldError,
  readCheckpoint,
  RebuildProgress,
  rebuildProjectionsTogether,
  RebuildTogetherResult,
  RESET_LOCK_WAIT_MS,
  resetForRebuild,
} from '#event-store/projections';
import { allProjections, projectionsNamed, rebuildPassesOf } from '#payments/read-models';
import type { RebuildPassMessage, RebuildPassWork } from './rebuild-pass.worker';

/**
 * `npm run projections:rebuild [-- name... --batch-size N --from-events --handover-wait S]`: empties the
 * named read models (all when none is named) and rebuilds them from position zero of
 * the log, in pages of N events (default 10000), with a progress bar (decision 0095):
 *
 * - the read models are shared between passes that run at once, a thread each
 *   (REBUILD_PASSES), each reading only its part of the log, once for all of its read
 *   models; one pass when only one has read models to rebuild, or when the store
 *   cannot read part of the log in one read (readAllThrough);
 * - a read model that SQL can compute from the log's own table (the stream catalog:
 *   Projection.rebuildInDatabase) is, when the log is in the same database, unless
 *   `--from-events` asks for every read model from its events (to check that SQL
 *   against the projection's own code: the checksums must be equal).
 *
 * Safe against a running gateway: it first takes every projection it rebuilds over
 * from the running projectors (they stand by, and go on from the rebuilt checkpoints
 * when it ends) or exits 2 naming the holder, having changed nothing. Then it marks
 * the read models as being rebuilt, so that the API answers 503 with Retry-After for
 * them instead of an empty answer, waits REBUILD_ANNOUNCE_MS for every API process to
 * see the mark (when a serving process is connected to the database at all), and only
 * then empties them.
 *
 * Safe to interrupt at any point: before the mark nothing has changed; after it, the
 * projectors take their projections back and finish the rebuild from each one's last
 * committed batch (or run the command again), and the API answers 503 for those read
 * models until they have caught up. Holds no secrets key: it writes the read models,
 * never a secret.
 */
export const REBUILD_ANNOUNCE_MS = 3_000;

const USAGE =
  'usage: npm run projections:rebuild [-- name... --batch-size N --from-events --handover-wait S]\n' +
  `  name: a read model (all when none): ${allProjections.map((p) => p.name).join(', ')}; --batch-size 1..50000; --handover-wait 1..3600 s (15)`;

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  usageOnHelp(USAGE);
  let batchSize: number | undefined;
  let handoverWaitSeconds: number | undefined;
  let fromEvents = false;
  const names: string[] = [];
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--from-events') {
      fromEvents = true;
    } else if (args[i] === '--batch-size') {
      batchSize = Number(args[++i]);
      if (!Number.isInteger(batchSize) || batchSize < 1 || batchSize > 50_000) fail('--batch-size takes an integer from 1 to 50000');
    } else if (args[i] === '--handover-wait') {
      handoverWaitSeconds = Number(args[++i]);
      if (!Number.isInteger(handoverWaitSeconds) || handoverWaitSeconds < 1 || handoverWaitSeconds > 3600)
        fail('--handover-wait takes seconds, from 1 to 3600');
    } else if (args[i]!.startsWith('-')) {
      fail(`unknown option ${args[i]}`);
    } else {
      names.push(args[i]!);
    }
  }
  const known = new Map(allProjections.map((p) => [p.name, p]));
  const unknown = names.filter((n) => !known.has(n));
  if (unknown.length > 0) fail(`unknown projection ${unknown.join(', ')}; known: ${[...known.keys()].join(', ')}`);
  const selected = projectionsNamed(names);

  const config = loadConfigOrExit('projections:rebuild');
  const logLevel = config.logLevel ?? 'warn';
  const log = createLogger('projections-rebuild', logLevel);
  const infra = await openInfrastructure(config, log, {
    applicationName: 'gateway-rebuild',
    limits: COMMAND_SESSION_LIMITS,
    secrets: false,
    createDatabase: false,
  });
  let locks: HeldProjectionLocks;
  try {
    locks = await HeldProjectionLocks.takeOver(
      infra.pool,
      selected.map((p) => p.name),
      { log, waitMs: handoverWaitSeconds === undefined ? undefined : handoverWaitSeconds * 1000 },
    );
  } catch (error) {
    await infra.close();
    if (error instanceof ProjectionHeldError) fail(error.message);
    throw error;
  }
  process.stdout.write(`took over ${selected.map((p) => p.name).join(', ')}: running projectors stand by until the rebuild ends\n`);
  try {
    await announceRebuild(infra.pool, selected);
    // Only a serving process that looked at the marks just before they were set could still
    // read a table being emptied; with none connected to the database there is nobody to wait for.
    const serving = await servingSessions(infra.pool);
    if (serving > 0) await new Promise((resolve) => setTimeout(resolve, REBUILD_ANNOUNCE_MS));
    process.stdout.write(
      serving > 0
        ? `marked as being rebuilt; waited ${REBUILD_ANNOUNCE_MS / 1000} s for the serving processes (${serving} sessions) to see it\n`
        : 'marked as being rebuilt; no serving process is connected to the database: nothing to wait for\n',
    );
    let told = '';
    await resetForRebuild(infra.pool, selected, {
      onWait: (holders) => {
        const now = holders.join(', ');
        if (now !== told) {
          process.stdout.write(
            `waiting to empty the read models: ${now || 'another session'} still reads them (a ledger:verify, a checksum, a report?); ` +
              `it waits at most ${RESET_LOCK_WAIT_MS} ms at a time (readers queue behind it meanwhile) and tries again until they end (or stop them)\n`,
          );
        }
        told = now;
      },
    });
    const bar = new ProgressBar('projections'.padEnd(16));
    // Progress through the log, in log events (each once, never a sum over the projections): how far the
    // slowest projection that reads the log page by page has come (one computed in SQL is done at once).
    const logEvents = infra.store.keepsLogIn?.(infra.pool) ? await visibleLogEvents(infra.pool) : null;
    const progress = new Map<string, RebuildProgress>();
    const onProgress = (p: RebuildProgress) => {
      progress.set(p.projection, p);
      const reading = selected.filter((s) => progress.get(s.name)?.readsLog !== false);
      const fraction = Math.min(
        ...(reading.length > 0 ? reading : selected).map((s) => {
          const at = progress.get(s.name);
          return at === undefined ? 0 : at.done ? 1 : at.fraction;
        }),
      );
      const through = Math.min(fraction, 0.999);
      bar.update(through, logEvents === null ? 'of the log read' : `about ${Math.round(through * logEvents)} of ${logEvents} log events read`);
    };
    const started = Date.now();
    const passes = rebuildPassesOf(selected);
    // In passes at once when the store reads part of the log in one read (readAllThrough); else the one pass.
    const results =
      passes.length > 1 && infra.store.readAllThrough
        ? await rebuildInPasses(infra, passes, locks, { batchSize, computeInDatabase: !fromEvents, log, logLevel, onProgress })
        : [
            await rebuildProjectionsTogether(infra.pool, infra.store, selected, {
              batchSize,
              computeInDatabase: !fromEvents,
              resume: true,
              locks,
              log,
              onProgress,
            }),
          ];
    const seconds = (Date.now() - started) / 1000;
    outcomeDecided(0); // rebuilt: a Ctrl-C from here on (the summary, the hand-back) does not make it "interrupted"
    bar.update(1, logEvents === null ? 'done' : `the log read to its head (about ${logEvents} log events)`, true);
    const byName = new Map(results.flatMap((r) => r.projections).map((r) => [r.projection, r]));
    const rebuilt = selected.map((p) => byName.get(p.name)!);
    for (const r of rebuilt) {
      const rate = Number(r.eventsApplied) / Math.max(r.seconds, 0.001);
      process.stdout.write(
        `rebuilt ${r.projection}: ${r.eventsApplied} events in ${r.seconds.toFixed(1)} s (${Math.round(rate)} events/s, ${r.applySeconds.toFixed(1)} s in its batches)\n`,
      );
    }
    process.stdout.write(readSummary(results, results.length > 1 ? passes : [selected], seconds));
    process.stdout.write(
      throughputSummary(
        rebuilt.map((r) => ({ name: r.projection, eventsApplied: r.eventsApplied, seconds: r.seconds })),
        await logEventsCovered(infra, selected, results),
        seconds,
      ),
    );
  } finally {
    await locks.release();
    await infra.close();
  }
}

/**
 * Every read model in passes at once (decision 0095), already reset: the first pass on
 * this thread and each other on a thread of its own (rebuild-pass.worker), each
 * resuming its projections from their checkpoints and reading only its part of the
 * log, all under the locks this thread's session holds (were they lost, the threads
 * are stopped). A pass that fails stops the others (their batches commit with their
 * checkpoints: run the command again, or start the projector, and each goes on from
 * where it stopped).
 */
async function rebuildInPasses(
  infra: InfrastructureWithoutSecrets,
  passes: readonly (readonly Projection[])[],
  locks: HeldProjectionLocks,
  options: { batchSize?: number; computeInDatabase: boolean; log: Logger; logLevel: string; onProgress: (p: RebuildProgress) => void },
): Promise<RebuildTogetherResult[]> {
  const [own, ...others] = passes;
  const threads = others.map((pass) =>
    passInThread(
      {
        databaseUrl: infra.databaseUrl,
        projections: pass.map((p) => p.name),
        batchSize: options.batchSize,
        computeInDatabase: options.computeInDatabase,
        logLevel: options.logLevel,
      },
      options.onProgress,
    ),
  );
  // The threads cannot see the locks: watched here, and the threads stopped if they are lost.
  const watch = setInterval(() => {
    if (locks.lost !== null) void Promise.all(threads.map((t) => t.stop()));
  }, 500);
  try {
    const mine = await rebuildProjectionsTogether(infra.pool, infra.store, own!, {
      batchSize: options.batchSize,
      computeInDatabase: options.computeInDatabase,
      resume: true,
      locks,
      log: options.log,
      onProgress: options.onProgress,
    });
    return [mine, ...(await Promise.all(threads.map((t) => t.result)))];
  } catch (error) {
    await Promise.all(threads.map((t) => t.stop()));
    throw error;
  } finally {
    clearInterval(watch);
  }
}

/** A pass on a thread of its own: its result, and a way to stop it. */
function passInThread(work: RebuildPassWork, onProgress: (p: RebuildProgress) => void): { result: Promise<RebuildTogetherResult>; stop(): Promise<void> } {
  const worker = new Worker(path.join(__dirname, 'rebuild-pass.worker.js'), { workerData: work });
  const result = new Promise<RebuildTogetherResult>((resolve, reject) => {
    let done: RebuildTogetherResult | null = null;
    worker.on('message', (message: RebuildPassMessage) => {
      if (message.kind === 'progress') onProgress(message.progress);
      else done = message.result;
    });
    worker.on('error', reject);
    worker.on('exit', (code) =>
      done ? resolve(done) : reject(new Error(`the pass of ${work.projections.join(', ')} ended (exit code ${code}) without its result`)),
    );
  });
  // Awaited by the command; a failure while it waits for its own pass is not left unhandled.
  result.catch(() => undefined);
  return { result, stop: async () => void (await worker.terminate()) };
}

/** How the log was read: one pass, or passes at once (what each read); with the peak RSS. */
function readSummary(results: readonly RebuildTogetherResult[], passes: readonly (readonly Projection[])[], seconds: number): string {
  const read = results.reduce((sum, r) => sum + r.logEventsRead, 0);
  const waited = (r: RebuildTogetherResult) => `${r.readWaitSeconds.toFixed(1)} s waiting for pages`;
  if (results.length === 1) {
    const rate = read / Math.max(seconds, 0.001);
    return `read the log once: ${read} events in ${seconds.toFixed(1)} s (${Math.round(rate)} log events/s, ${waited(results[0]!)}); peak RSS ${peakRssMiB()} MiB\n`;
  }
  const lines = results.map((r, i) => `  pass ${i + 1} (${passes[i]!.map((p) => p.name).join(', ')}): read ${r.logEventsRead} events, ${waited(r)}`);
  return `read the log in ${results.length} passes at once, one thread each: ${read} events read in ${seconds.toFixed(1)} s; peak RSS ${peakRssMiB()} MiB\n${lines.join('\n')}\n`;
}

/** The largest resident set of this process so far, in MiB. */
function peakRssMiB(): number {
  return Math.round(process.resourceUsage().maxRSS / 1024);
}

/**
 * The events of the log the rebuild covered, each once: those from position zero up to
 * the furthest head a pass reached (each projection's checkpoint is at its pass's head).
 */
async function logEventsCovered(
  infra: InfrastructureWithoutSecrets,
  selected: readonly Projection[],
  results: readonly RebuildTogetherResult[],
): Promise<number> {
  // Log in this database: one count up to that head; else the one pass read every event to its head (readAll pages).
  if (!infra.store.keepsLogIn?.(infra.pool)) return results.reduce((sum, r) => sum + r.logEventsRead, 0);
  let head: Position | null = null;
  for (const p of selected) {
    const at = (await readCheckpoint(infra.pool, p.name))?.position;
    if (at && (head === null || comparePositions(at, head) > 0)) head = at;
  }
  if (head === null) return 0;
  const counted = await infra.pool.query<{ n: string }>(
    'SELECT count(*) AS n FROM events WHERE (transaction_id, global_position) <= ($1::text::xid8, $2::bigint)',
    [head.commit.toString(), head.prepare.toString()],
  );
  return Number(counted.rows[0]!.n);
}

/**
 * The throughput of each projection's rebuild (events it applied per second, up to its
 * last batch), then of the whole run in log events: the events of the log it covered,
 * each once, over the run's seconds (never a sum over the projections, which counts an
 * event once for each projection that applies it).
 */
function throughputSummary(results: readonly { name: string; eventsApplied: bigint; seconds: number }[], logEvents: number, seconds: number): string {
  const rate = (events: bigint | number, seconds: number) => String(Math.round(Number(events) / Math.max(seconds, 0.001)));
  const rows = [
    ['projection', 'events', 'seconds', 'events/s'],
    ...results.map((r) => [r.name, String(r.eventsApplied), r.seconds.toFixed(1), rate(r.eventsApplied, r.seconds)]),
  ];
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((row) => row[i]!.length)));
  const lines = rows.map((row) => row.map((cell, i) => (i === 0 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!))).join('  '));
  const log = `the log: ${logEvents} events from position zero in ${seconds.toFixed(1)} s, ${rate(logEvents, seconds)} log events/s`;
  return `\nthroughput:\n${lines.map((l) => `  ${l}`).join('\n')}\n${log}\n`;
}

function fail(message: string): never {
  process.stderr.write(`projections:rebuild: ${message}\n`);
  process.exit(2);
}

main().catch((error) => {
  if (error instanceof NoEmbeddedDatabaseError) fail(error.message);
  process.stderr.write(`projections:rebuild failed: ${(error as Error).message}\n`);
  process.exit(couldNotRun(error) ? 2 : 1);
});
