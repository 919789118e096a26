import { loadConfigOrExit, usageOnHelp } from '#payments/composition';
import { comparePositions, positionToString } from '#event-store';
import { openInfrastructure } from '#payments/composition';
import { COMMAND_SESSION_LIMITS, outcomeDecided } from '#platform/database';
import { createLogger } from '#platform/logging';
import { allProjections, formatChecksums, READ_MODEL_TABLES, readModelsInOneSnapshot } from '#payments/read-models';

/**
 * `npm run read-models:checksum [table...]`: one line per read-model table (table,
 * rows, md5 of its rows in primary-key order, identity columns counted by their
 * order only), so an operator can compare a live read model with a rebuilt one, or
 * two replicas. Where each projection stands against the head of the log goes to
 * stderr, read in the checksums' snapshot: compare checksums taken at the same position. Reads only: a read-only database
 * role and no secrets key are enough.
 */
async function main(): Promise<void> {
  const tables = process.argv.slice(2);
  usageOnHelp(`usage: npm run read-models:checksum [table...]\n  tables (all when none): ${READ_MODEL_TABLES.join(', ')}`);
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
    // One snapshot: the checksums, the checkpoints and (the log in this database) its head.
    const { head, checksums, standings } = await readModelsInOneSnapshot(
      infra.pool,
      allProjections.map((p) => p.name),
      tables.length > 0 ? tables : READ_MODEL_TABLES,
      infra.store.keepsLogIn?.(infra.pool) ? undefined : () => infra.store.headPosition(),
    );
    const notes: string[] = [`log head: ${head ? positionToString(head) : 'empty log'}`];
    for (const { projection, position, rebuilding } of standings) {
      const behind = head !== null && comparePositions(position, head) < 0;
      notes.push(`  ${projection}: at ${positionToString(position)}${behind ? ' (behind the head)' : ''}${rebuilding ? ' (rebuild in progress)' : ''}`);
    }
    process.stderr.write(`${notes.join('\n')}\n`);
    process.stdout.write(`${formatChecksums(checksums)}\n`);
    outcomeDecided(0); // printed: a Ctrl-C while it closes does not change the outcome
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
