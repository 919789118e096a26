import { parentPort, workerData } from 'node:worker_threads';
import { PostgresEventStore } from '#event-store';
import { RebuildProgress, rebuildProjectionsTogether, RebuildTogetherResult } from '#event-store/projections';
import { allProjections } from '#payments/read-models';
import { COMMAND_SESSION_LIMITS, createPool } from '#platform/database';
import { createLogger } from '#platform/logging';

/** What `projections:rebuild` hands the thread of one of its passes. */
export interface RebuildPassWork {
  readonly databaseUrl: string;
  /** The projections of this pass (already reset, their locks held by the command: the pass resumes them from their checkpoints). */
  readonly projections: readonly string[];
  readonly batchSize?: number;
  readonly computeInDatabase: boolean;
  readonly logLevel: string;
}

/** What the thread posts back: progress as it goes, then the pass's result (bigints cross as they are). */
export type RebuildPassMessage =
  { readonly kind: 'progress'; readonly progress: RebuildProgress } | { readonly kind: 'result'; readonly result: RebuildTogetherResult };

/**
 * One pass of `projections:rebuild` on a thread of its own (decision 0095): the
 * projections named, reset by the command, rebuilt from their checkpoints
 * (rebuildProjectionsTogether with `resume`) over a pool of the thread's own. The
 * thread ends with the process: a rebuild killed mid-way leaves every pass where its
 * last batch committed.
 */
async function runPass(work: RebuildPassWork): Promise<void> {
  const port = parentPort!;
  const known = new Map(allProjections.map((p) => [p.name, p]));
  const projections = work.projections.map((name) => {
    const projection = known.get(name);
    if (!projection) throw new Error(`unknown projection ${name}`);
    return projection;
  });
  const log = createLogger('projections-rebuild', work.logLevel);
  const pool = createPool(work.databaseUrl, { max: 20, applicationName: 'gateway-rebuild', limits: COMMAND_SESSION_LIMITS });
  const store = new PostgresEventStore(pool);
  try {
    const result = await rebuildProjectionsTogether(pool, store, projections, {
      batchSize: work.batchSize,
      computeInDatabase: work.computeInDatabase,
      resume: true,
      // Held by the command's own session, which stops this thread if it loses them.
      locks: { lost: null },
      log,
      onProgress: (progress) => port.postMessage({ kind: 'progress', progress } satisfies RebuildPassMessage),
    });
    port.postMessage({ kind: 'result', result } satisfies RebuildPassMessage);
  } finally {
    await store.close();
    await pool.end();
  }
}

if (parentPort === null) {
  process.stderr.write('rebuild-pass.worker: a thread of projections:rebuild, not a command of its own\n');
  process.exit(2);
}
// A failure is an unhandled rejection, which ends the thread: the command gets it as the worker's 'error'.
void runPass(workerData as RebuildPassWork);
