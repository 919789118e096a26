import { couldNotRun, loadConfigOrExit, openInfrastructure, refuseArgumentsOrExit } from '#payments/composition';
import { AuditSigningKeys } from '#payments/audit';
import { createLogger } from '#platform/logging';
import { outcomeDecided } from '#platform/database';

/**
 * `npm run audit:rotate-signing-key`: a new Ed25519 key signs the checkpoints and
 * statements from now on; the one before stays listed by GET /v1/audit/keys with its
 * validUntil, so what it signed still verifies. The new private key goes where the
 * current one is (DATA_DIR/audit-signing.key, or sealed in the database: only then is
 * the secrets key read). With AUDIT_SIGNING_KEY set it refuses (configuration, exit 2):
 * a new key is set there instead.
 */
async function main(): Promise<void> {
  refuseArgumentsOrExit('audit:rotate-signing-key');
  const config = loadConfigOrExit('audit:rotate-signing-key');
  if (config.auditSigningKey) {
    process.stderr.write(
      'audit:rotate-signing-key: AUDIT_SIGNING_KEY is set, and this command does not change it: set a new key there ' +
        '(openssl genpkey -algorithm ed25519) on every process and restart them; the gateway publishes it at its first ' +
        'signature and retires the one before. Nothing was changed\n',
    );
    process.exit(2);
  }
  const log = createLogger('audit-rotate-signing-key', config.logLevel ?? 'warn');
  const options = { applicationName: 'gateway-audit-rotate-signing-key', poolSize: 2, createDatabase: false };
  // The key file needs no secrets key (nor do the webhook secrets' keys matter): only a key sealed in the database does.
  const infra =
    config.databaseUrl === null ? await openInfrastructure(config, log, { ...options, secrets: false }) : await openInfrastructure(config, log, options);
  try {
    const keys = new AuditSigningKeys(infra.pool, infra, infra.clock);
    const { retired, current } = await keys.rotate();
    // Committed: a Ctrl-C while it closes does not make it "interrupted".
    outcomeDecided(0);
    process.stdout.write(
      `audit:rotate-signing-key: key ${current} signs from now on (${keys.where === 'file' ? keys.file : 'sealed in the database'}); ` +
        `${retired === null ? 'no key was current before' : `key ${retired} retired, still listed by GET /v1/audit/keys`}.\n`,
    );
  } finally {
    await infra.close();
  }
}

main().catch((error) => {
  process.stderr.write(`audit:rotate-signing-key failed: ${(error as Error).message}\n`);
  process.exit(couldNotRun(error) ? 2 : 1);
});
