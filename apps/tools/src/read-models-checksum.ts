import { loadConfigOrExit } from '#payments/composition';
import { comparePositions, positionToString } from '#event-store';
import { openInfrastructure } from '#payments/composition';
import { COMMAND_SESSION_LIMITS } from '#platform/database';
import { createLogger } from '#platform/logging';
import { readCheckpoint } from '#event-store/projections';
import { allProjections, formatChecksums, READ_MODEL_TABLES, readModelChecksums } from '#payments/read-models';

/**
 * `npm run read-models:checksum [table...]`: one line per read-model table (table,
 * rows, md5 of its rows in primary-key order, identity columns counted by their
 * order only), so an operator can compare a live read model with a rebuilt one, or
 * two replicas. Where each projection stands against the head of the log goes to
 * stderr: compare checksums taken at the same position. Reads only: a read-only database
 * role and no secrets key are enough.
 */
async function main(): Promise<void> {
  const tables = process.argv.slice(2);
  const option = tables.find((t) => t.startsWith('-'));
  if (option) fail(`unknown option ${option}`);
  const unknown = tables.filter((t) => !READ_MODEL_TABLES.includes(t));
  if (unknown.length > 0) fail(`unknown table ${unknown.join(', ')}; read-model tables: ${READ_MODEL_TABLES.join(', ')}`);

  const config = loadConfigOrExit('read-models:checksum');
  const log = createLogger('read-models-checksum', config.logLevel ?? 'warn');
  const infra = await openInfrastructure(config, log, {
    applicationName: 'gateway-read-models-checksum',
    poolSize: 2,
    limits: COMMAND_SESSION_LIMITS,
    access: 'read-only',
  });
  try {
    const head = await infra.store.headPosition();
    const checksums = await readModelChecksums(infra.pool, tables.length > 0 ? tables : READ_MODEL_TABLES);
    const notes: string[] = [`log head: ${head ? positionToString(head) : 'empty log'}`];
    for (const projection of allProjections) {
      const row = await readCheckpoint(infra.pool, projection.name);
      const at = row?.position ?? { commit: 0n, prepare: 0n };
      const behind = head !== null && comparePositions(at, head) < 0;
      notes.push(
        `  ${projection.name}: at ${positionToString(at)}${behind ? ' (behind the head)' : ''}${row?.rebuildStartedAt ? ' (rebuild in progress)' : ''}`,
      );
    }
    process.stderr.write(`${notes.join('\n')}\n`);
    process.stdout.write(`${formatChecksums(checksums)}\n`);
  } finally {
    await infra.close();
  }
}

function fail(message: string): never {
  process.stderr.write(`read-models:checksum: ${message}\n`);
  process.exit(2);
}

// Exit 2: it could not run (no database, a schema not fully migrated), as the other read-only commands.
main().catch((error) => {
  process.stderr.write(`read-models:checksum failed: ${(error as Error).message}\n`);
  process.exit(2);
});
