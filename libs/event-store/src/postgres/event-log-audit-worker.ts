import { parentPort, workerData } from 'node:worker_threads';
import { COMMAND_SESSION_LIMITS, createPool } from '#platform/database';
import { followLogChains, pageBuffers } from './event-log-audit';

/** Pages posted and not yet taken by the parent, beyond which the read of the log waits. */
const PAGES_AHEAD = 4;

/**
 * The body of verifyEventLogInWorker: reads the log and recomputes its chains on a pool
 * of its own (followLogChains), posts each page (what the order check needs, and the
 * forwarded events; at most PAGES_AHEAD not yet taken), then what the chains gave (or
 * the error's message).
 */
async function run(): Promise<void> {
  const { databaseUrl, applicationName, readOnly, upTo, forward } = workerData as {
    databaseUrl: string;
    applicationName: string;
    readOnly: boolean;
    upTo: { commit: bigint; prepare: bigint } | null;
    forward: { streamNamePrefix: string; eventType: string } | null;
  };
  const pool = createPool(databaseUrl, { max: 3, applicationName, limits: COMMAND_SESSION_LIMITS, readOnly });
  let untaken = 0;
  let taken: (() => void) | null = null;
  parentPort!.on('message', () => {
    untaken -= 1;
    taken?.();
    taken = null;
  });
  try {
    const chains = await followLogChains(pool, { ...(upTo ? { upTo } : {}), ...(forward ? { forward } : {}) }, async (page, forwarded) => {
      while (untaken >= PAGES_AHEAD) await new Promise<void>((resolve) => (taken = resolve));
      untaken += 1;
      parentPort!.postMessage({ page, forwarded }, pageBuffers(page, forwarded));
    });
    parentPort!.postMessage({ chains });
  } catch (error) {
    parentPort!.postMessage({ error: (error as Error).message });
  } finally {
    parentPort!.removeAllListeners('message');
    await pool.end();
  }
}

void run();
