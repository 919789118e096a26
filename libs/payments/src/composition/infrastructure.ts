import type { Pool } from 'pg';
import { GatewayClock, ManualClock, ManualClockSync, SystemClock } from '#platform/clock';
import type { GatewayConfig } from './config';
import {
  checkMigrated,
  createPool,
  DatabaseNotReachedError,
  EmbeddedDatabase,
  isDatabaseNotReached,
  makeTraversable,
  migrate,
  MigrationError,
  MigrationFailedError,
  NoEmbeddedDatabaseError,
  requireEmbeddedCluster,
  SessionLimits,
  startEmbeddedPostgres,
} from '#platform/database';
import { allMigrations } from './migrations';
import { EventStore, PostgresEventStore } from '#event-store';
import { checkServerPastEventLog } from '#event-store/postgres';
import type { Logger } from '#platform/logging';
import { checkWebhookSecretKeys, WebhookSecretKeysNotHeldError } from '../merchants/webhook-secrets';
import { SecretBox, secretKeySource, secretsKeyFileOf } from '#platform/secrets';
import { existsSync, rmSync } from 'node:fs';

/** What every process of the gateway stands on: database, event store, clock, secrets key. */
export interface Infrastructure extends InfrastructureWithoutSecrets {
  /** Seals and opens secrets at rest (webhook secrets), with SECRETS_KEY or DATA_DIR/secrets.key. */
  readonly secrets: SecretBox;
}

/** What a command that holds no secrets key stands on (the verify and audit commands, projections:rebuild). */
export interface InfrastructureWithoutSecrets {
  readonly config: GatewayConfig;
  readonly databaseUrl: string;
  readonly pool: Pool;
  readonly store: EventStore;
  readonly clock: GatewayClock;
  /** Set with CLOCK=manual. */
  readonly clockSync: ManualClockSync | null;
  /** 'read-only': every session of the pool is read-only; a pool the process opens besides (a worker's) must be too. */
  readonly access: DatabaseAccess;
  close(): Promise<void>;
}

/**
 * 'read-write' (the serving processes, projections:rebuild): the schema is migrated.
 * 'read-only' (the verify and audit commands): nothing is written, neither the schema
 * (a database not fully migrated is refused, naming what it lacks) nor anything else:
 * every session is read-only, no secrets key is read or created, no embedded cluster
 * or database is created, and the manual clock is only read. The database role then
 * needs only SELECT.
 */
export type DatabaseAccess = 'read-write' | 'read-only';

/** The roles of the serving processes: `npm start` (gateway), `start:api`, `start:projector`. */
export type ServingRole = 'gateway' | 'api' | 'projector';
const SERVING_ROLES: readonly ServingRole[] = ['gateway', 'api', 'projector'];
/** The application_name of a serving process's sessions. */
export const servingApplicationName = (role: ServingRole): string => `gateway-${role}`;

/**
 * How many sessions serving processes hold on this database (pg_stat_activity shows
 * every session's database and application_name to every role). A serving process keeps
 * a session from its start on (its view of the rebuild marks is refreshed every half
 * second), and one that starts later reads the marks before its first answer.
 */
export async function servingSessions(pool: Pick<Pool, 'query'>): Promise<number> {
  const r = await pool.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = ANY($1::text[])',
    [SERVING_ROLES.map(servingApplicationName)],
  );
  return r.rows[0]!.n;
}

export interface InfrastructureOptions {
  readonly applicationName?: string;
  readonly poolSize?: number;
  /** Session bounds of the pool (default SERVING_SESSION_LIMITS; the operator's commands pass COMMAND_SESSION_LIMITS). */
  readonly limits?: SessionLimits;
  /** Default 'read-write'. */
  readonly access?: DatabaseAccess;
  /**
   * false: no secrets key (SECRETS_KEY or DATA_DIR/secrets.key) is read, none is
   * created, and the stored secrets are not checked against it: for a process that
   * never opens or seals one. Always so with `access: 'read-only'`.
   */
  readonly secrets?: boolean;
  /**
   * Without DATABASE_URL: whether a DATA_DIR without a database gets one (default: a
   * read-write opening does). false for a command that only makes sense on the
   * gateway's data (rebuild, key rotations): a wrong DATA_DIR is refused before
   * anything (a key file too) is made there.
   */
  readonly createDatabase?: boolean;
}

/** Connections a serving process's pool opens at most (the API's, the projector's): a server needs this many per process. */
export const PROCESS_POOL_SIZE = 20;

/** The options of a process that holds no secrets key. */
type WithoutSecrets = InfrastructureOptions & ({ readonly access: 'read-only' } | { readonly secrets: false });

export async function openInfrastructure(config: GatewayConfig, log: Logger, options: WithoutSecrets): Promise<InfrastructureWithoutSecrets>;
export async function openInfrastructure(config: GatewayConfig, log: Logger, options?: InfrastructureOptions): Promise<Infrastructure>;
export async function openInfrastructure(
  config: GatewayConfig,
  log: Logger,
  options: InfrastructureOptions = {},
): Promise<Infrastructure | InfrastructureWithoutSecrets> {
  const access = options.access ?? 'read-write';
  const readOnly = access === 'read-only';
  if (readOnly && options.secrets === true) throw new Error('a read-only opening holds no secrets key');
  const withSecrets = !readOnly && options.secrets !== false;
  const createDatabase = !readOnly && options.createDatabase !== false;
  if (config.databaseUrl === null && !createDatabase) requireEmbeddedCluster(config.dataDir);
  // DATA_DIR made before the key file is written there: a read-only filesystem is named as one.
  if (config.databaseUrl === null && createDatabase) makeTraversable(config.dataDir);
  // A key file this start makes (none under DATA_DIR yet): removed again if the database's secrets need another key.
  const keyFile = withSecrets && config.secretsKeys === null ? secretsKeyFileOf(config.dataDir) : null;
  const keyFileMade = keyFile !== null && !existsSync(keyFile);
  const secrets = withSecrets ? new SecretBox(secretKeySource(config)) : null;
  let embedded: EmbeddedDatabase | null = null;
  let databaseUrl = config.databaseUrl;
  if (databaseUrl === null) {
    log.info({ dataDir: config.dataDir }, 'DATABASE_URL is not set: starting the embedded PostgreSQL');
    embedded = await startEmbeddedPostgres(config.dataDir, {
      log: (line) => log.debug({ postgres: line }),
      create: createDatabase,
      onServerGone: (message) => log.error(message),
    });
    databaseUrl = embedded.url;
  }
  const pool = createPool(databaseUrl, {
    max: options.poolSize ?? PROCESS_POOL_SIZE,
    applicationName: options.applicationName,
    limits: options.limits,
    readOnly,
  });
  let followerPool: Pool | null = null;
  let clockSync: ManualClockSync | null = null;
  try {
    // Every stored secret must open with this process's keys: judged before migrating, so a process refused for its
    // configuration changes nothing (a new version's replica started without the key must not migrate a shared database).
    if (secrets && (await pool.query<{ t: string | null }>(`SELECT to_regclass('projects')::text AS t`)).rows[0]!.t !== null) {
      await checkWebhookSecretKeys(pool, secrets).catch((error: unknown) => {
        // Nothing was sealed with a key just made (the stored secrets need another): a restore missing its key file keeps none.
        if (keyFileMade) rmSync(keyFile, { force: true });
        throw error;
      });
    }
    if (readOnly) {
      await checkMigrated(pool, allMigrations);
    } else {
      const applied = await migrate(pool, allMigrations, {
        onIndexBuild: (index, waitingFor) =>
          waitingFor.length === 0
            ? log.info({ index }, 'schema migration: building an index concurrently')
            : log.warn(
                { index, waitingFor },
                'schema migration: the index build waits for these sessions of the database to end their transactions; the gateway starts after it',
              ),
      });
      if (applied.length > 0) log.info({ versions: applied }, 'schema migrations applied');
    }

    // The log is ordered by transaction ids: a server behind them (a logical restore) would hide every new event,
    // and show a verifier none of the log (an empty log that verifies).
    if (config.eventStore === 'postgres') await checkServerPastEventLog(pool);

    if (!readOnly && config.clock !== 'manual') await checkClockNotBehindManual(pool);

    // The EventStoreDB client (and its gRPC stack) is loaded only by a gateway configured for it.
    const store: EventStore =
      config.eventStore === 'eventstoredb'
        ? (await import('#event-store/eventstoredb')).EventStoreDbEventStore.fromConnectionString(config.eventStoreConnectionString!)
        : new PostgresEventStore(pool);

    let clock: GatewayClock = new SystemClock();
    if (config.clock === 'manual') {
      // Reads the shared offset (and follows it); only POST /admin/v1/clock/advance writes it.
      // A writing process follows it on a session of its own, which an advance waits for (read-only: only polled).
      const manual = new ManualClock();
      followerPool = readOnly ? null : createPool(databaseUrl, { max: 1, applicationName: options.applicationName, limits: options.limits });
      clockSync = new ManualClockSync(pool, manual, { followerPool: followerPool ?? undefined, log });
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
      access,
      ...(secrets ? { secrets } : {}),
      async close() {
        clockSync?.stop();
        await store.close();
        await followerPool?.end();
        await pool.end();
        await embedded?.stop();
      },
    };
  } catch (error) {
    clockSync?.stop();
    await followerPool?.end().catch(() => undefined);
    await pool.end().catch(() => undefined);
    await embedded?.stop().catch(() => undefined);
    // A migration's error says itself what happened (its message may name a lost connection after others were applied).
    throw !(error instanceof MigrationError) && isDatabaseNotReached(error) ? new DatabaseNotReachedError(error) : error;
  }
}

/**
 * A command's failure that means it could not run (exit 2; 1 is for one that ran and
 * failed, docs/operations.md): no database under DATA_DIR, the database not reached or
 * the role refused, a schema it cannot bring to (or find at) this version, or stored
 * secrets sealed with a key it was not given (checked before anything is written); not a
 * migration whose own SQL failed (MigrationFailedError: the schema changed).
 */
export function couldNotRun(error: unknown): boolean {
  // A migration that failed after others were applied changed the database: a failure (1), not a refusal (2).
  return (
    error instanceof NoEmbeddedDatabaseError ||
    error instanceof DatabaseNotReachedError ||
    error instanceof WebhookSecretKeysNotHeldError ||
    (error instanceof MigrationError && !(error instanceof MigrationFailedError))
  );
}

/**
 * A database whose manual clock was advanced holds times ahead of the system clock:
 * a process writing by the system clock would stamp new events before them (a closed
 * period's statement would change, a poll mark would lock its invoice out). The clock
 * only moves forward, so such a database is run with CLOCK=manual.
 */
async function checkClockNotBehindManual(pool: Pool): Promise<void> {
  const offset = Number((await pool.query<{ offset_ms: string }>('SELECT offset_ms FROM manual_clock')).rows[0]?.offset_ms ?? 0);
  if (offset > 0) {
    throw new Error(
      `this database ran with CLOCK=manual, its clock advanced ${offset / 1000} s past the system clock: without CLOCK=manual its times would go back (the clock only moves forward); start it with CLOCK=manual`,
    );
  }
}
