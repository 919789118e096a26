import type { INestApplicationContext } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { CommandBus } from '@nestjs/cqrs';
import type { EventStore, LogVisibility } from '#event-store';
import { PostgresEventStore, positionToString, readLogVisibility } from '#event-store';
import type { Infrastructure } from '#payments/composition';
import type { GatewayServices } from '#payments/services';
import type { Logger } from '#platform/logging';
import { DatabaseOutageLog } from '#platform/database';
import { LogSubscriber, ProjectionRunner, ReadModelRebuilds } from '#event-store/projections';
import { allProjections } from '#payments/read-models';
import { releaseDueHolds } from '#payments/ledger';
import { expireDueInvoices } from '#payments/invoices';
import { PeriodicWorker } from '#payments/flows';
import { ProjectorModule } from './projector.module';
import { allReactors } from '#payments/reactors';
import { completeDueRefunds } from '#payments/refunds';
import { recoverHalfDoneFlows } from '#payments/flows';
import { disableFailingEndpoints, ENDPOINT_FAILING_DAYS, sweepRetention } from '#payments/webhooks';
import { WorkerItems } from '#payments/flows';
import { UnopenableWebhookSecretError } from '#payments/merchants';
import { WebhookDispatcher, webhookOutbox } from '#payments/webhooks';
import { disabledWebhookEndpoints, GatewayMetrics, projectionLag, webhookQueueDepth } from '#payments/observability';

/** One projection in the readiness report. */
export interface ProjectionReport {
  readonly projection: string;
  readonly state: string;
  readonly checkpoint: string | null;
  readonly lastError: string | null;
  /** Events of the log after the stored checkpoint (counted up to 10 000); null when the database could not be asked. */
  readonly lag?: number | null;
}

/**
 * The projector process's work: every read-model projection, reactor (the process
 * managers) and the webhook outbox, each as its own runner (one active instance per
 * name across processes), and the workers driven by the gateway clock. It runs as a
 * NestJS application context: the reactors and workers send their writes as commands
 * through its CommandBus, the same command classes and handlers as the API's.
 */
export class Projector {
  /** The projector over a new application context (closed by `stop`). */
  static async create(
    infra: Infrastructure,
    services: GatewayServices,
    log: Logger,
    publicUrl: () => string,
    rebuilds: ReadModelRebuilds,
    metrics?: GatewayMetrics,
  ): Promise<Projector> {
    const context = await NestFactory.createApplicationContext(ProjectorModule.register(services, infra.pool, infra.store), {
      logger: false,
      abortOnError: false,
    });
    return new Projector(context, infra, services, log, publicUrl, rebuilds, metrics);
  }

  private readonly runners: ProjectionRunner[];
  private readonly workers: PeriodicWorker[];
  private readonly dispatcher: WebhookDispatcher;
  private readonly lag: () => ReturnType<typeof projectionLag>;
  /** With the PostgreSQL event store: how far the visible log trails the appended one. */
  private readonly logVisibility: (() => Promise<LogVisibility>) | null;

  private constructor(
    private readonly context: INestApplicationContext,
    infra: Infrastructure,
    services: GatewayServices,
    log: Logger,
    publicUrl: () => string,
    private readonly rebuilds: ReadModelRebuilds,
    metrics?: GatewayMetrics,
  ) {
    const store: EventStore = infra.store;
    const commands = context.get(CommandBus);
    const subscribers: LogSubscriber[] = [
      ...allProjections,
      ...allReactors(commands),
      webhookOutbox(store, services.registry, infra.clock, publicUrl, infra.config.webhookRetentionDays),
    ];
    const dispatcher = new WebhookDispatcher(infra.pool, services.registry, infra.clock, {
      concurrency: 32,
      allowPrivateNetworks: infra.config.webhookAllowPrivateNetworks,
      onAttempt: metrics?.onWebhookAttempt,
    });
    // The database away: told once per outage (and once a minute), not a stack every 100 ms.
    const outage = new DatabaseOutageLog(log, 'webhook dispatcher');
    dispatcher.onRound = () => outage.succeeded();
    // A project whose secret does not open here: told once a minute per project, not at every claim of its deliveries.
    const unsignable = new Map<string, number>();
    dispatcher.onError = (error) => {
      if (error instanceof UnopenableWebhookSecretError) {
        const last = unsignable.get(error.projectId) ?? -Infinity;
        const now = performance.now();
        if (now - last < 60_000) return;
        // Bounded without a flood: entries older than a minute go; past 1,000 projects at once, the others wait their turn.
        if (unsignable.size >= 1000) for (const [id, at] of unsignable) if (now - at >= 60_000) unsignable.delete(id);
        if (unsignable.size >= 1000) return;
        unsignable.set(error.projectId, now);
        log.error({ err: error }, 'webhook dispatcher: a delivery cannot be signed here; nothing is sent or charged to the merchant until the secret opens');
        return;
      }
      if (outage.failed(error)) return;
      log.error(
        { err: error },
        'webhook dispatcher: a claim, lease renewal or batch of attempts failed (unrecorded attempts are made again when their leases run out)',
      );
    };
    this.dispatcher = dispatcher;
    this.runners = subscribers.map(
      (p) => new ProjectionRunner(infra.pool, store, p, { log, onBatch: metrics?.onProjectionBatch, onError: metrics?.onProjectionError }),
    );
    const names = subscribers.map((p) => p.name);
    this.lag = () => projectionLag(infra.pool, store, subscribers);
    this.logVisibility = store instanceof PostgresEventStore ? () => readLogVisibility(infra.pool) : null;
    if (metrics) {
      metrics.registerProjections(names);
      metrics.addProjectionLagSource(this.lag);
      if (this.logVisibility) metrics.addLogVisibilitySource(this.logVisibility);
      metrics.addWebhookQueueSource(() => webhookQueueDepth(infra.pool, infra.clock));
      metrics.addDisabledEndpointsSource(() => disabledWebhookEndpoints(infra.pool));
    }
    // Each worker's items fail alone: logged, counted, retried after a back-off.
    const items = (worker: string) => new WorkerItems(worker, infra.clock, log, metrics?.onWorkerItemFailure);
    // A worker finds its work in read models: while one is rebuilt (empty, then partial), it waits.
    const reading = (models: readonly string[], tick: () => Promise<number>) => async (): Promise<number> =>
      (await this.rebuilds.rebuilding(models)).length > 0 ? 0 : tick();
    metrics?.registerWorkers(['invoice-expiry', 'hold-release', 'refund-processor', 'flow-recovery']);
    this.workers = [
      new PeriodicWorker('invoice-expiry', 500, reading(['invoices'], expireDueInvoices(infra.pool, commands, infra.clock, items('invoice-expiry'))), log),
      new PeriodicWorker('hold-release', 500, reading(['ledger'], releaseDueHolds(infra.pool, commands, infra.clock, items('hold-release'))), log),
      new PeriodicWorker('refund-processor', 500, reading(['refunds'], completeDueRefunds(infra.pool, commands, infra.clock, items('refund-processor'))), log),
      new PeriodicWorker(
        'flow-recovery',
        1000,
        reading(['refunds', 'payouts'], recoverHalfDoneFlows(infra.pool, commands, infra.clock, items('flow-recovery'))),
        log,
      ),
      // A sweep of whole tables by age (no items to fail alone).
      new PeriodicWorker('retention', 5000, sweepRetention(infra.pool, infra.clock, infra.config.webhookRetentionDays), log, 1000),
      new PeriodicWorker(
        'endpoint-health',
        5000,
        async () => {
          const disabled = await disableFailingEndpoints(infra.pool, infra.clock.now());
          // The operator's sign: once disabled, the endpoint's retries and queue go quiet.
          for (const e of disabled) {
            log.warn(
              {
                worker: 'endpoint-health',
                projectId: e.projectId,
                host: e.host,
                failingSince: e.failingSince.toISOString(),
                stoppedDeliveries: e.stoppedDeliveries,
              },
              `webhook endpoint disabled: every attempt failed for ${ENDPOINT_FAILING_DAYS} days; POST /admin/v1/projects/{id}/webhook-endpoint/enable resends what is owed`,
            );
          }
          return disabled.length;
        },
        log,
      ),
    ];
  }

  start(): void {
    for (const runner of this.runners) runner.start();
    for (const worker of this.workers) worker.start();
    // Its own loop: a claim as soon as slots free up, every 100 ms when idle.
    this.dispatcher.start();
  }

  async stop(): Promise<void> {
    await Promise.all([...this.workers.map((w) => w.stop()), ...this.runners.map((r) => r.stop())]);
    await this.dispatcher.stop();
    await this.context.close();
  }

  /** Each runner's state, with its lag behind the head of the log (null when the database does not answer). */
  async reportWithLag(): Promise<ProjectionReport[]> {
    const lags = await this.lag().catch(() => null);
    return this.report().map((r) => ({ ...r, lag: lags?.find((l) => l.projection === r.projection)?.lagEvents ?? null }));
  }

  /**
   * For readiness: how far the log subscribers see trails the appended log, and the
   * cluster's oldest transaction holding it back (undefined without the PostgreSQL
   * event store, null when the database does not answer).
   */
  async eventLogReport(): Promise<LogVisibility | null | undefined> {
    if (!this.logVisibility) return undefined;
    return this.logVisibility().catch(() => null);
  }

  report(): ProjectionReport[] {
    return this.runners.map((r) => {
      const s = r.status();
      return {
        projection: s.projection,
        state: s.state,
        checkpoint: s.checkpoint ? positionToString(s.checkpoint) : null,
        lastError: s.lastError,
      };
    });
  }
}
