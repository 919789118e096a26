import { parentPort, workerData } from 'node:worker_threads';
import { COMMAND_SESSION_LIMITS, createPool } from '#platform/database';
import { ForwardedEvent, verifyEventLog } from './event-log-audit';

/** Pages of forwarded events posted and not yet taken by the parent, beyond which the read of the log waits. */
const FORWARDED_PAGES_AHEAD = 4;

/**
 * The body of verifyEventLogInWorker: verifies the log on a pool of its own, posts the
 * forwarded events page by page (at most FORWARDED_PAGES_AHEAD not yet acknowledged),
 * and posts the report (or the error's message) back.
 */
async function run(): Promise<void> {
  const { databaseUrl, applicationName, upTo, forward } = workerData as {
    databaseUrl: string;
    applicationName: string;
    upTo: { commit: bigint; prepare: bigint } | null;
    forward: { streamNamePrefix: string; eventType: string } | null;
  };
  const pool = createPool(databaseUrl, { max: 3, applicationName, limits: COMMAND_SESSION_LIMITS });
  let unacknowledged = 0;
  let acknowledged: (() => void) | null = null;
  parentPort!.on('message', () => {
    unacknowledged -= 1;
    acknowledged?.();
    acknowledged = null;
  });
  const onEvents = async (events: ForwardedEvent[]) => {
    while (unacknowledged >= FORWARDED_PAGES_AHEAD) await new Promise<void>((resolve) => (acknowledged = resolve));
    unacknowledged += 1;
    parentPort!.postMessage({ events });
  };
  try {
    const report = await verifyEventLog(pool, { ...(upTo ? { upTo } : {}), ...(forward ? { forward: { ...forward, onEvents } } : {}) });
    parentPort!.postMessage({ report });
  } catch (error) {
    parentPort!.postMessage({ error: (error as Error).message });
  } finally {
    parentPort!.removeAllListeners('message');
    await pool.end();
  }
}

void run();
