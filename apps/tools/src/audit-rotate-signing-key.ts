import { couldNotRun, loadConfigOrExit, openInfrastructure, refuseArgumentsOrExit } from '#payments/composition';
import { AuditSigningKeys } from '#payments/audit';
import { createLogger } from '#platform/logging';

/**
 * `npm run audit:rotate-signing-key`: a new Ed25519 key signs the checkpoints and
 * statements from now on; the one before stays listed by GET /v1/audit/keys with its
 * validUntil, so what it signed still verifies. The new private key goes where the
 * current one is (DATA_DIR/audit-signing.key, or sealed in the database); with
 * AUDIT_SIGNING_KEY set it refuses: a new key is set there instead.
 */
async function main(): Promise<void> {
  refuseArgumentsOrExit('audit:rotate-signing-key');
  const config = loadConfigOrExit('audit:rotate-signing-key');
  const infra = await openInfrastructure(config, createLogger('audit-rotate-signing-key', config.logLevel ?? 'warn'), {
    applicationName: 'gateway-audit-rotate-signing-key',
    poolSize: 2,
    createDatabase: false,
  });
  try {
    const keys = new AuditSigningKeys(infra.pool, infra, infra.clock);
    const { retired, current } = await keys.rotate();
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
