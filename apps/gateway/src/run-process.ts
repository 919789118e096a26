import { randomBytes } from 'node:crypto';
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { loadConfigOrExit, openInfrastructure, refuseArgumentsOrExit, ServingRole, servingApplicationName, urlHostOf } from '#payments/composition';
import type { GatewayConfig } from '#payments/composition';
import { DatabaseNotReachedError } from '#platform/database';
import { createLogger, exitAfterLogs } from '#platform/logging';
import { createServices } from '#payments/services';
import { AuditSigningKeys } from '#payments/audit';
import { observeCommands } from '#event-store';
import { ReadModelRebuilds, rebuildsInProgress } from '#event-store/projections';
import { GatewayMetrics } from '#payments/observability';
import { createApi } from '../../api/src/create-api';
import type { ReadinessProbe } from '../../api/src/health/readiness';
import { MetricsServer, startMetricsServer } from '../../api/src/health/metrics-endpoint';
import { Projector } from '../../projector/src/projector';
import { ConnectionDrain, connectionDrain, PROXY_DRAIN_MS } from '../../api/src/http/connection-drain';
import { catchStopSignals, StopSignals } from './stop-signals';

/** A stop's bound: the proxy's drain (10 s) and 5 s more; past it the process exits 1, saying why. */
const FORCED_STOP_MS = PROXY_DRAIN_MS + 5_000;

export interface ProcessRoles {
  readonly name: ServingRole;
  readonly api: boolean;
  readonly projector: boolean;
}

/**
 * Starts a gateway process with the roles asked for: `npm start` runs everything in
 * one process, `start:api` and `start:projector` run them apart against one
 * database. Stops cleanly on SIGINT/SIGTERM: the API first stops accepting connections
 * and finishes the requests in flight (connection-drain.ts), then the projector stops.
 */
export async function runProcess(roles: ProcessRoles, signals: StopSignals = catchStopSignals()): Promise<void> {
  // Configured by the environment: `npm start -- --port 4000` would otherwise listen on PORT.
  refuseArgumentsOrExit(roles.name);
  const config = loadConfigOrExit(roles.name);
  // A host name that does not resolve is a bad value too: refused (exit 2) before the database is touched, as the others.
  if (
    isIP(config.host) === 0 &&
    !(await lookup(config.host).then(
      () => true,
      () => false,
    ))
  ) {
    process.stderr.write(`${roles.name}: Invalid configuration:\n  - HOST "${config.host}" does not resolve to an address to listen on\n`);
    process.exit(2);
  }
  // A projector alone listens on no port: the invoice urls in the webhooks it sends can only be PUBLIC_URL's.
  if (roles.projector && !roles.api && config.publicUrl === null) {
    process.stderr.write(
      `${roles.name}: Invalid configuration:\n  - PUBLIC_URL must be set for start:projector: its webhooks carry invoice urls, and it serves none itself (set where buyers reach the API, on every process)\n`,
    );
    process.exit(2);
  }
  const log = createLogger(roles.name === 'gateway' ? 'gateway' : `gateway-${roles.name}`, config.logLevel ?? undefined);
  // What has started, stopped in reverse if the start fails: a projector still running would
  // log into the closed log stream (an uncaught error), and the embedded server would outlive the process.
  const started: (() => unknown)[] = [];
  // Signals are handled from the start (the entry point caught them before loading this
  // module). One that comes while the process starts is a stop the start-up honours as
  // soon as it can: it stops what it started (the embedded server unless another process
  // is on it) and exits 0, as a stop after the start does.
  const honourStopRequest = () => {
    if (signals.requested !== null) throw new StopRequested(signals.requested);
  };

  try {
    // Signalled while its modules loaded: nothing started yet. The signal is delivered in the
    // event loop's poll phase, which comes between two turns' setImmediate callbacks.
    await new Promise((resolve) => setImmediate(() => setImmediate(resolve)));
    honourStopRequest();
    const infra = await openInfrastructure(config, log, { applicationName: servingApplicationName(roles.name) });
    started.push(() => infra.close());
    honourStopRequest();
    // Metrics of this process: its requests, commands, ledgers, projections, workers and webhook attempts.
    const metrics = new GatewayMetrics({}, log);
    observeCommands(metrics.commandObserver);
    const services = createServices(infra, { ledger: metrics.ledgerObserver, flows: metrics.flowObserver });
    // Where buyers reach the payment page (invoice urls, also in webhooks): known once the API listens.
    const local = urlHostOf(config.host);
    const publicUrl = { value: config.publicUrl ?? `http://${local}:${config.port}` };
    // Which read models are being rebuilt, one view for the process: the API's routes and the workers read it.
    const rebuilds = new ReadModelRebuilds(infra.pool);
    rebuilds.start();
    started.push(() => rebuilds.stop());
    const projector = roles.projector ? await Projector.create(infra, services, log, () => publicUrl.value, rebuilds, metrics) : null;
    projector?.start();
    started.push(() => projector?.stop());
    const readiness: ReadinessProbe = async () => {
      const rebuilding = await rebuildsInProgress(rebuilds, infra.store);
      const shown = rebuilding.length > 0 ? { rebuilds: rebuilding } : {};
      if (!projector) return shown;
      const [projections, eventLog] = await Promise.all([projector.reportWithLag(), projector.eventLogReport()]);
      return eventLog === undefined ? { projections, ...shown } : { projections, eventLog, ...shown };
    };
    const metricsServer: MetricsServer | null =
      config.metricsPort === null ? null : await startMetricsServer({ host: config.host, port: config.metricsPort }, metrics, infra.pool, readiness, log);
    started.push(() => metricsServer?.close());
    const metricsLine = metricsServer ? `  metrics and health (METRICS_PORT, no token): http://${local}:${metricsServer.port}/metrics` : null;

    let app: NestFastifyApplication | null = null;
    let stopFollowingSecrets: (() => void) | null = null;
    let drain: ConnectionDrain | null = null;
    let adminToken = config.adminToken;
    if (roles.api) {
      // A retired signing key never signs again: refused now, naming it, not at the first statement (docs/audit-log.md).
      await new AuditSigningKeys(infra.pool, infra, infra.clock).refuseRetired();
      const tokenWasGenerated = adminToken === null;
      // 24 random bytes: 32 base64url characters, the shortest token accepted.
      adminToken ??= randomBytes(24).toString('base64url');
      app = await createApi(
        {
          infrastructure: infra,
          services,
          adminToken,
          publicUrl,
          readiness,
          readModelRebuilds: rebuilds,
        },
        log,
        { metrics },
      );
      started.push(() => app?.close());
      // Every existing key known before the first request: a failing attempt with one costs no lookup.
      const { unopenable } = await services.registry.warmUpCredentials();
      for (const error of unopenable) log.warn({ projectId: error.projectId }, error.message);
      stopFollowingSecrets = services.registry.followWebhookSecretChanges();
      drain = connectionDrain(app.getHttpServer());
      honourStopRequest();
      await app.listen({ port: config.port, host: config.host });
      const address = app.getHttpServer().address();
      const port = typeof address === 'object' && address ? address.port : config.port;
      const base = `http://${local}:${port}`;
      if (config.publicUrl === null) publicUrl.value = base;
      const lines = [
        `Payment gateway (${roles.name}) listening on ${base}${config.host === '127.0.0.1' ? '' : ` (HOST=${config.host})`}`,
        `  merchant API:  ${base}/v1`,
        `  operator API:  ${base}/admin/v1`,
        `  console:       ${base}/admin (log in with the operator token)`,
        `  metrics:       ${base}/metrics (operator token)`,
        ...(metricsLine ? [metricsLine] : []),
        // A token from the environment is never printed (logs are read by more people than the operator).
        tokenWasGenerated
          ? `  operator token (ADMIN_TOKEN, generated for this run): ${adminToken}`
          : '  operator token: the ADMIN_TOKEN of the environment (not printed)',
        `  database: ${config.databaseUrl ? 'DATABASE_URL' : `embedded PostgreSQL under ${config.dataDir}`}; event store: ${config.eventStore}; clock: ${config.clock}`,
      ];
      const sandbox = await services.registry.createSandboxIfEmpty(infra.clock.now());
      if (sandbox) {
        lines.push(
          `  empty database: created a sandbox project ${sandbox.project.id} (shown once, keep them):`,
          `    test secret key: ${sandbox.keys.test.secretKey}   public key: ${sandbox.keys.test.publicKey}`,
          `    try: curl -H 'Authorization: Bearer ${sandbox.keys.test.secretKey}' ${base}/v1/methods`,
        );
      }
      process.stdout.write(`${lines.join('\n')}\n`);
    } else {
      process.stdout.write(`Payment gateway (${roles.name}) running ${projector?.report().length ?? 0} projections\n${metricsLine ? `${metricsLine}\n` : ''}`);
    }

    let stopping = false;
    const stop = async (signal: string) => {
      if (stopping) return;
      stopping = true;
      log.info({ signal }, 'stopping');
      // What the stop waits for now: named by the line of a stop forced at its bound.
      let waitingFor = 'the open connections to close';
      let forced = false;
      const force = setTimeout(() => {
        forced = true;
        const exitForced = (open: number) => {
          log.error(
            { signal, openConnections: open },
            `not stopped within ${FORCED_STOP_MS / 1000} s, waiting for ${waitingFor} (${open} connection(s) still open): the stop is forced, exit 1`,
          );
          exitAfterLogs(log, 1);
        };
        const server = app?.getHttpServer();
        if (server) server.getConnections((error, open) => exitForced(error ? 0 : open));
        else exitForced(0);
      }, FORCED_STOP_MS);
      force.unref();
      stopFollowingSecrets?.();
      // No 5xx and no reset connection for the clients: stop accepting, serve what is in
      // flight, and behind a proxy (TRUSTED_PROXIES) let it close its idle connections.
      await drain?.drain({ waitForClients: config.trustedProxies.length > 0 }).catch((error: unknown) => log.warn({ err: error }, 'drain failed'));
      waitingFor = 'the API to close';
      await app?.close().catch(() => undefined);
      waitingFor = 'the metrics listener to close';
      await metricsServer?.close().catch(() => undefined);
      waitingFor = 'the projector to stop';
      await projector?.stop().catch(() => undefined);
      rebuilds.stop();
      waitingFor = 'the database sessions to close';
      await infra.close().catch(() => undefined);
      if (forced) return;
      log.info({ signal }, 'stopped');
      exitAfterLogs(log, 0);
    };
    signals.onStop((signal) => void stop(signal));
  } catch (error) {
    if (error instanceof StopRequested) {
      log.info({ signal: error.signal }, 'stopping while starting');
      for (const close of started.reverse())
        await Promise.resolve()
          .then(close)
          .catch(() => undefined);
      log.info({ signal: error.signal }, 'stopped');
      exitAfterLogs(log, 0);
      return;
    }
    log.fatal({ err: error }, 'the gateway could not start');
    process.stderr.write(`The gateway could not start: ${startFailure(error, config)}\n`);
    for (const close of started.reverse())
      await Promise.resolve()
        .then(close)
        .catch(() => undefined);
    exitAfterLogs(log, 1);
  }
}

/**
 * Why the start failed, naming the variable to change where the error's own text does not:
 * a driver's "connect ECONNREFUSED" or "listen EADDRINUSE" says nothing of DATABASE_URL or PORT.
 */
function startFailure(error: unknown, config: GatewayConfig): string {
  const message = error instanceof Error ? error.message : String(error);
  const { code, port } = error as { code?: unknown; port?: unknown };
  if (error instanceof DatabaseNotReachedError && config.databaseUrl !== null) {
    const url = new URL(config.databaseUrl.replace('@/', '@localhost/'));
    return `${message} (DATABASE_URL: the database ${url.hostname || 'localhost'}:${url.port || 5432}${url.pathname} was not reached)`;
  }
  if (code === 'EADDRINUSE' || code === 'EACCES') {
    const variable = port === config.metricsPort ? 'METRICS_PORT' : port === config.port ? 'PORT' : null;
    const why = code === 'EADDRINUSE' ? 'another process listens on it' : 'a port below 1024 needs privileges';
    if (variable !== null) return `${message} (${variable}: ${why}; set ${variable} to another port)`;
  }
  return message;
}

/** A signal came while the process started: what started is stopped, and the process exits 0. */
class StopRequested extends Error {
  constructor(readonly signal: string) {
    super(`stopped by ${signal} while starting`);
  }
}
