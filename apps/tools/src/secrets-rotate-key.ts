import { randomBytes } from 'node:crypto';
import { couldNotRun, loadConfigOrExit, refuseArgumentsOrExit } from '#payments/composition';
import { openInfrastructure } from '#payments/composition';
import { createLogger } from '#platform/logging';
import { outcomeDecided } from '#platform/database';
import { resealWebhookSecrets, unopenableWebhookSecrets } from '#payments/merchants';
import { AuditSigningKeys } from '#payments/audit';
import type { Infrastructure } from '#payments/composition';
import { keyIdOf, keyFileSource, writeKeyFile } from '#platform/secrets';

/** Seals every stored secret with the box's current key; how many webhook secrets, and a line when the audit signing key was too. */
async function reseal(infra: Infrastructure): Promise<[number, string]> {
  const webhook = await resealWebhookSecrets(infra.pool, infra.secrets);
  const signing = await new AuditSigningKeys(infra.pool, infra, infra.clock).reseal();
  return [webhook, signing > 0 ? '  The audit signing key (sealed in the database) was sealed again too.\n' : ''];
}

/**
 * Refuses (before anything is written: the key file, a secret) when a stored webhook
 * secret does not open with the keys held, naming each such project and the call
 * that replaces its secret: sealed again, it would stay unusable under the new key.
 */
async function refuseUnopenable(infra: Infrastructure): Promise<void> {
  const unopenable = await unopenableWebhookSecrets(infra.pool, infra.secrets);
  if (unopenable.length === 0) return;
  throw new Error(
    `nothing was changed: the webhook secret of ${unopenable.length} project(s) does not open with the keys held, so it cannot be ` +
      `sealed again; replace each with POST /admin/v1/projects/{id}/webhook-secret/rotate, then run this again:\n` +
      unopenable.map((e) => `  ${e.message}`).join('\n'),
  );
}

/**
 * `npm run secrets:rotate-key`: seals every stored secret (the projects' webhook
 * secrets, the audit signing key when it is kept in the database) with a new key.
 *
 * - Without SECRETS_KEY (the key file DATA_DIR/secrets.key): generates a key, puts it
 *   first in the file (the processes that use the file seal with it from their next
 *   write and open both), re-seals every secret with it, then keeps the new key and
 *   the one before it (for a write that was in flight during the rotation).
 * - With SECRETS_KEY: the operator has put the new key first (SECRETS_KEY=new,old) on
 *   every process; this re-seals every secret with it. Afterwards SECRETS_KEY=new.
 */
async function main(): Promise<void> {
  refuseArgumentsOrExit('secrets:rotate-key');
  const config = loadConfigOrExit('secrets:rotate-key');
  const log = createLogger('secrets-rotate-key', config.logLevel ?? 'warn');
  if (config.secretsKeys) {
    const infra = await openInfrastructure(config, log, { applicationName: 'gateway-secrets-rotate-key', poolSize: 2, createDatabase: false });
    try {
      await refuseUnopenable(infra);
      const [resealed, signing] = await reseal(infra);
      outcomeDecided(0); // every secret sealed again: a Ctrl-C from here on does not make it "interrupted"
      const current = infra.secrets.currentKeyId;
      process.stdout.write(
        `secrets:rotate-key: ${resealed} webhook secret(s) sealed again with key ${current} (the first of SECRETS_KEY); every secret is now under it.\n` +
          (config.secretsKeys.length > 1
            ? `  Once every process runs with this key first, remove the others from SECRETS_KEY (key ids ${config.secretsKeys.slice(1).map(keyIdOf).join(', ')}).\n`
            : '  SECRETS_KEY holds one key: to rotate, put a new key first (SECRETS_KEY=new,old) on every process, then run this again.\n') +
          signing,
      );
    } finally {
      await infra.close();
    }
    return;
  }

  // The key file: checked against the database first (refuseUnopenable), so that a refusal leaves it as it was.
  const infra = await openInfrastructure(config, log, { applicationName: 'gateway-secrets-rotate-key', poolSize: 2, createDatabase: false });
  try {
    await refuseUnopenable(infra);
    const source = keyFileSource(config.dataDir);
    const before = source.keys();
    const fresh = randomBytes(32);
    writeKeyFile(source.file, [fresh, ...before]);
    // infra.secrets follows the file: it seals with the new key from here on.
    const [resealed, signing] = await reseal(infra);
    if (infra.secrets.currentKeyId !== keyIdOf(fresh)) throw new Error(`${source.file} changed during the rotation; run it again`);
    writeKeyFile(source.file, [fresh, before[0]!]);
    outcomeDecided(0); // the rotation is done: a Ctrl-C from here on does not make it "interrupted"
    process.stdout.write(
      `secrets:rotate-key: new key ${keyIdOf(fresh)} in ${source.file}; ${resealed} webhook secret(s) sealed again with it.\n` +
        `  The previous key ${keyIdOf(before[0]!)} stays in the file to open anything written during the rotation; older ones were dropped.\n` +
        '  Keep a copy of the key file apart from the database backups, for as long as they are kept: a backup opens only with the keys of its time.\n' +
        signing,
    );
  } finally {
    await infra.close();
  }
}

main().catch((error) => {
  process.stderr.write(`secrets:rotate-key failed: ${(error as Error).message}\n`);
  process.exit(couldNotRun(error) ? 2 : 1);
});
