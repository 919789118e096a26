import type { Pool } from 'pg';
import { GatewayClock, ManualClock, ManualClockSync, SystemClock } from '#platform/clock';
import type { GatewayConfig } from './config';
import { createPool, EmbeddedDatabase, migrate, SessionLimits, startEmbeddedPostgres } from '#platform/database';
import { allMigrations } from './migrations';
import { EventStore, PostgresEventStore } from '#event-store';
import type { Logger } from '#platform/logging';
import { checkWebhookSecretKeys } from '../merchants/webhook-secrets';
import { SecretBox, secretKeySource } from '#platform/secrets';

/** What every process of the gateway stands on: database, event store, clock. */
export interface Infrastructure {
  readonly config: GatewayConfig;
  readonly databaseUrl: string;
  readonly pool: Pool;
  readonly store: EventStore;
  readonly clock: GatewayClock;
  /** Set with CLOCK=manual. */
  readonly clockSync: ManualClockSync | null;
  /** Seals and opens secrets at rest (webhook secrets), with SECRETS_KEY or DATA_DIR/secrets.key. */
  readonly secrets: SecretBox;
  close(): Promise<void>;
}

export async function openInfrastructure(
  config: GatewayConfig,
  log: Logger,
  options: {
    applicationName?: string;
    poolSize?: number;
    /** Session bounds of the pool (default SERVING_SESSION_LIMITS; the operator's commands pass COMMAND_SESSION_LIMITS). */
    limits?: SessionLimits;
  } = {},
): Promise<Infrastructure> {
  const secrets = new SecretBox(secretKeySource(config));
  let embedded: EmbeddedDatabase | null = null;
  let databaseUrl = config.databaseUrl;
  if (databaseUrl === null) {
    log.info({ dataDir: config.dataDir }, 'DATABASE_URL is not set: starting the embedded PostgreSQL');
    embedded = await startEmbeddedPostgres(config.dataDir, { log: (line) => log.debug({ postgres: line }) });
    databaseUrl = embedded.url;
  }
  const pool = createPool(databaseUrl, { max: options.poolSize ?? 20, applicationName: options.applicationName, limits: options.limits });
  try {
    const applied = await migrate(pool, allMigrations);
    if (applied.length > 0) log.info({ versions: applied }, 'schema migrations applied');
    // Every stored secret must open with this process's keys.
    await checkWebhookSecretKeys(pool, secrets);

    // The EventStoreDB client (and its gRPC stack) is loaded only by a gateway configured for it.
    const store: EventStore =
      config.eventStore === 'eventstoredb'
        ? (await import('#event-store/eventstoredb')).EventStoreDbEventStore.fromConnectionString(config.eventStoreConnectionString!)
        : new PostgresEventStore(pool);

    let clock: GatewayClock = new SystemClock();
    let clockSync: ManualClockSync | null = null;
    if (config.clock === 'manual') {
      const manual = new ManualClock();
      clockSync = new ManualClockSync(pool, manual);
      await clockSync.start();
      clock = manual;
    }

    return {
      config,
      databaseUrl,
      pool,
      store,
      clock,
      clockSync,
      secrets,
      async close() {
        clockSync?.stop();
        await store.close();
        await pool.end();
        await embedded?.stop();
      },
    };
  } catch (error) {
    await pool.end().catch(() => undefined);
    await embedded?.stop().catch(() => undefined);
    throw error;
  }
}
