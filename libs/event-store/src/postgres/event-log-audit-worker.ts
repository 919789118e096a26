import { parentPort, workerData } from 'node:worker_threads';
import { COMMAND_SESSION_LIMITS, createPool } from '#platform/database';
import { verifyEventLog } from './event-log-audit';

/**
 * The body of verifyEventLogInWorker: verifies the log on a pool of its own and posts
 * the report (or the error's message) back.
 */
async function run(): Promise<void> {
  const { databaseUrl, applicationName } = workerData as { databaseUrl: string; applicationName: string };
  const pool = createPool(databaseUrl, { max: 3, applicationName, limits: COMMAND_SESSION_LIMITS });
  try {
    parentPort!.postMessage({ report: await verifyEventLog(pool) });
  } catch (error) {
    parentPort!.postMessage({ error: (error as Error).message });
  } finally {
    await pool.end();
  }
}

void run();
