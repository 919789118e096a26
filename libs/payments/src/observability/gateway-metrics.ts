import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { AUTH_FAILURE_KINDS, AuthFailureKind } from '../access/auth-failures';
import type { CommandObserver, LogVisibility } from '#event-store';
import type { LedgerBookObserver } from '../ledger/ledger-book';
import type { FlowObserver } from '../flows/flow-observer';
import type { Logger } from '#platform/logging';
import type { WebhookAttemptOutcome } from '../webhooks/webhook-dispatcher';
import type { ProjectionLag } from './projection-lag';

/** A route label for requests that matched no route (never the raw URL: unbounded label values). */
export const UNMATCHED_ROUTE = 'unmatched';

export interface WebhookQueueDepth {
  /** Deliveries not yet delivered nor failed for good. */
  readonly pending: number;
  /** Of those, the ones whose next attempt is due now (the dispatcher's backlog). */
  readonly due: number;
}

/**
 * The process's Prometheus metrics (text exposition at /metrics). The libs only
 * report to plain observer hooks; this is the one place that knows prom-client.
 * Gauges of shared state (projection lag, webhook queue) are read from the database
 * when scraped, by the sources the process registers.
 */
export class GatewayMetrics {
  readonly registry = new Registry();

  private readonly httpRequests = new Counter({
    name: 'http_requests_total',
    help: 'HTTP requests answered, by method, route pattern and status code',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [this.registry],
  });

  private readonly httpDuration = new Histogram({
    name: 'http_request_duration_seconds',
    help: 'Time from the request to the end of its response, by method and route pattern',
    labelNames: ['method', 'route'] as const,
    buckets: [0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });

  private readonly commands = new Counter({
    name: 'commands_total',
    help: 'Commands handled on event streams, by stream category and outcome (appended, unchanged, refused, error)',
    labelNames: ['category', 'outcome'] as const,
    registers: [this.registry],
  });

  private readonly commandConflicts = new Counter({
    name: 'command_conflicts_total',
    help: 'Appends refused because the stream had moved (optimistic concurrency), by stream category',
    labelNames: ['category'] as const,
    registers: [this.registry],
  });

  private readonly commandRetries = new Counter({
    name: 'command_retries_total',
    help: 'Commands decided again on fresh state after a revision conflict, by stream category',
    labelNames: ['category'] as const,
    registers: [this.registry],
  });

  private readonly commandAttempts = new Histogram({
    name: 'command_attempts',
    help: 'Decisions one command took (1 = no conflict), by stream category',
    labelNames: ['category'] as const,
    buckets: [1, 2, 3, 5, 10, 20, 50, 100],
    registers: [this.registry],
  });

  private readonly projectionEventsApplied = new Counter({
    name: 'projection_events_applied_total',
    help: 'Events applied to a read model by this process, by projection',
    labelNames: ['projection'] as const,
    registers: [this.registry],
  });

  private readonly projectionFailures = new Counter({
    name: 'projection_batch_failures_total',
    help: 'Projection batches that failed and are retried, by projection',
    labelNames: ['projection'] as const,
    registers: [this.registry],
  });

  private readonly webhookAttempts = new Counter({
    name: 'webhook_attempts_total',
    help: 'Webhook delivery attempts recorded by this process, by outcome (delivered, retry, failed, superseded: it came back after its lease was taken over or the delivery was resent)',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });

  private readonly authFailures = new Counter({
    name: 'auth_failures_total',
    help: 'Failed authentications answered 401, by kind (secret_key, signature, operator_token)',
    labelNames: ['kind'] as const,
    registers: [this.registry],
  });

  private readonly authRefused = new Counter({
    name: 'auth_failures_refused_total',
    help: 'Failed authentications answered 429 because their client address (or all clients) were past the failed-authentication limits, by kind',
    labelNames: ['kind'] as const,
    registers: [this.registry],
  });

  private readonly authFailureLookups = new Counter({
    name: 'auth_failure_lookups_total',
    help: 'Failed authentications that asked the database about their credential (what failures cost the database), by kind',
    labelNames: ['kind'] as const,
    registers: [this.registry],
  });

  private readonly collectFailures = new Counter({
    name: 'metrics_collect_failures_total',
    help: 'Scrapes in which a gauge could not be read from the database, by gauge',
    labelNames: ['gauge'] as const,
    registers: [this.registry],
  });

  private readonly ledgerCauseLookups = new Counter({
    name: 'ledger_cause_lookups_total',
    help: "Causes older than a ledger's window of recent causes looked up in the log (cause index, then the stream), by result (posted, new)",
    labelNames: ['result'] as const,
    registers: [this.registry],
  });

  private readonly ledgerCauseLookupEntriesRead = new Counter({
    name: 'ledger_cause_lookup_stream_entries_read_total',
    help: 'Ledger entries those lookups read from the stream because the cause index did not hold them yet (it lags the log)',
    registers: [this.registry],
  });

  private readonly ledgerDuplicatesStoppedByStore = new Counter({
    name: 'ledger_duplicates_stopped_by_store_total',
    help:
      'Ledger entries the event store refused as an id it already holds, by what the ledger then held: concurrent (another writer ' +
      "had posted the cause with the same money: a stale decision), missed (the ledger's own cause check missed a repeat: a bug, " +
      'no money affected), differs (the cause is in the ledger with other money: money could be wrong)',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });

  private readonly ledgerSnapshotsRejected = new Counter({
    name: 'ledger_snapshots_rejected_total',
    help: 'Stored ledger snapshots that failed their checks on load and were ignored (the ledger was folded from its events)',
    registers: [this.registry],
  });

  private readonly flowStepsLeftToRecovery = new Counter({
    name: 'flow_steps_left_to_recovery_total',
    help: 'Refund and payout requests and transitions whose step after the first commit failed: answered with what was committed, finished by recovery or a process manager, by flow',
    labelNames: ['flow'] as const,
    registers: [this.registry],
  });

  private readonly workerItemFailures = new Counter({
    name: 'worker_item_failures_total',
    help: 'Items a periodic worker failed to process (each is retried later with back-off; the others go on), by worker',
    labelNames: ['worker'] as const,
    registers: [this.registry],
  });

  constructor(
    options: { defaultMetrics?: boolean } = {},
    private readonly log?: Logger,
  ) {
    if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: this.registry });
    for (const result of ['posted', 'new'] as const) this.ledgerCauseLookups.inc({ result }, 0);
    for (const outcome of ['concurrent', 'missed', 'differs'] as const) this.ledgerDuplicatesStoppedByStore.inc({ outcome }, 0);
    for (const flow of ['refund', 'payout'] as const) this.flowStepsLeftToRecovery.inc({ flow }, 0);
    for (const kind of AUTH_FAILURE_KINDS) {
      this.authFailures.inc({ kind }, 0);
      this.authRefused.inc({ kind }, 0);
      this.authFailureLookups.inc({ kind }, 0);
    }
  }

  /**
   * LedgerBook's observer: counts, and logs a repeat refused by the store at the level
   * it deserves (a stale decision at info, a missed repeat as a warning, an error only
   * where money could be wrong) and a rejected snapshot as a warning.
   */
  readonly ledgerObserver: LedgerBookObserver = {
    causeLookedUp: (_streamName, found, entriesReadFromStream) => {
      this.ledgerCauseLookups.inc({ result: found ? 'posted' : 'new' });
      if (entriesReadFromStream > 0) this.ledgerCauseLookupEntriesRead.inc(entriesReadFromStream);
    },
    repeatRefusedByStore: (streamName, repeat) => {
      this.ledgerDuplicatesStoppedByStore.inc({ outcome: repeat.outcome });
      const fields = { stream: streamName, cause: repeat.cause, decidedOn: repeat.decidedOn.toString(), storedAt: repeat.storedAt?.toString() ?? null };
      if (repeat.outcome === 'concurrent') {
        this.log?.info(fields, 'ledger: entry already posted by a concurrent writer with the same money; the stale decision was dropped');
      } else if (repeat.outcome === 'missed') {
        this.log?.warn(fields, "ledger: the event store refused a repeat the ledger's own cause check missed (no money affected)");
      } else {
        this.log?.error(
          { ...fields, refused: repeat.refused, stored: repeat.stored },
          'ledger: the event store refused an entry whose cause the ledger holds with other money (or not at all): money could be wrong',
        );
      }
    },
    snapshotRejected: (streamName, revision, reason) => {
      this.ledgerSnapshotsRejected.inc();
      this.log?.warn({ stream: streamName, revision: revision.toString(), reason }, 'ledger: stored snapshot ignored, folded from the events');
    },
  };

  /** The refund and payout commands: a step after the first commit that failed, answered with what was committed and left to recovery. */
  readonly flowObserver: FlowObserver = {
    leftToRecovery: (flow, id, error) => {
      this.flowStepsLeftToRecovery.inc({ flow });
      this.log?.warn(
        { flow, id, err: error },
        'a step after the first commit is not done: answered with what was committed; the recovery worker or a reactor finishes it',
      );
    },
  };

  /** Starts worker_item_failures_total{worker} at zero for each worker. */
  registerWorkers(names: readonly string[]): void {
    for (const worker of names) this.workerItemFailures.inc({ worker }, 0);
  }

  /** An item a periodic worker failed to process. */
  readonly onWorkerItemFailure = (worker: string): void => {
    this.workerItemFailures.inc({ worker });
  };

  /** One answered HTTP request; `route` is the route pattern or UNMATCHED_ROUTE. */
  observeRequest(method: string, route: string, status: number, seconds: number): void {
    this.httpRequests.inc({ method, route, status: String(status) });
    this.httpDuration.observe({ method, route }, seconds);
  }

  /** The hook for libs/event-store's handleCommand (observeCommands). */
  readonly commandObserver: CommandObserver = {
    conflict: (category, retrying) => {
      this.commandConflicts.inc({ category });
      if (retrying) this.commandRetries.inc({ category });
    },
    handled: (category, attempts, outcome) => {
      this.commands.inc({ category, outcome });
      if (attempts > 0) this.commandAttempts.observe({ category }, attempts);
    },
  };

  /** ProjectionRunner's onBatch. */
  readonly onProjectionBatch = (info: { projection: string; applied: number }): void => {
    // Counted from zero for every projection the process runs, so a rate works from the first scrape.
    this.projectionEventsApplied.inc({ projection: info.projection }, info.applied);
  };

  /** ProjectionRunner's onError. */
  readonly onProjectionError = (info: { projection: string }): void => {
    this.projectionFailures.inc({ projection: info.projection });
  };

  /** WebhookDispatcher's onAttempt. */
  readonly onWebhookAttempt = (outcome: WebhookAttemptOutcome): void => {
    this.webhookAttempts.inc({ outcome });
  };

  /** The API's failed-authentication hook: every series starts at zero, so an alert's rate works from the first scrape. */
  get authFailureObserver(): { failed(kind: AuthFailureKind): void; refused(kind: AuthFailureKind): void; lookedUp(kind: AuthFailureKind): void } {
    return {
      failed: (kind) => this.authFailures.inc({ kind }),
      refused: (kind) => this.authRefused.inc({ kind }),
      lookedUp: (kind) => this.authFailureLookups.inc({ kind }),
    };
  }

  /** Starts every series of a projection at zero (shown before its first batch). */
  registerProjections(names: readonly string[]): void {
    for (const projection of names) {
      this.projectionEventsApplied.inc({ projection }, 0);
      this.projectionFailures.inc({ projection }, 0);
    }
  }

  /** projection_lag_events{projection}, read at each scrape. */
  addProjectionLagSource(read: () => Promise<readonly ProjectionLag[]>): void {
    const collectFailures = this.collectFailures;
    const log = this.log;
    new Gauge({
      name: 'projection_lag_events',
      help: "Events of the global log after the projection's stored checkpoint (counted up to 10000)",
      labelNames: ['projection'] as const,
      registers: [this.registry],
      async collect() {
        try {
          const lags = await read();
          this.reset();
          for (const lag of lags) this.set({ projection: lag.projection }, lag.lagEvents);
        } catch (error) {
          // No number rather than a stale one: the alert on a missing series fires.
          this.reset();
          collectFailures.inc({ gauge: 'projection_lag_events' });
          log?.warn({ err: error }, 'projection lag could not be read for /metrics');
        }
      },
    });
    this.collectFailures.inc({ gauge: 'projection_lag_events' }, 0);
  }

  /**
   * How far the log subscribers see trails the appended log (PostgreSQL event store),
   * read at each scrape: event_log_invisible_events, event_log_invisible_oldest_seconds
   * and database_oldest_transaction_seconds{application_name, database}. The lag of
   * every projection is counted in the visible log, so it says 0 while these grow.
   */
  addLogVisibilitySource(read: () => Promise<LogVisibility>): void {
    const collectFailures = this.collectFailures;
    const log = this.log;
    // One read per scrape feeds the three gauges (collect is called for each).
    let pending: Promise<LogVisibility> | null = null;
    const once = (): Promise<LogVisibility> => {
      pending ??= read().finally(() => setImmediate(() => (pending = null)));
      return pending;
    };
    // An unlabelled gauge's reset() sets it to 0 ("every event visible": healthy), so a
    // failed read removes its one series instead: left out, as the labelled ones are.
    const failed = (gauge: string, error: unknown) => {
      collectFailures.inc({ gauge });
      log?.warn({ err: error }, `${gauge} could not be read for /metrics`);
    };
    new Gauge({
      name: 'event_log_invisible_events',
      help: 'Events appended and committed but not yet visible to subscribers because an older transaction of the cluster is still open (counted up to 10000)',
      registers: [this.registry],
      async collect() {
        try {
          this.set((await once()).invisibleEvents);
        } catch (error) {
          this.remove();
          failed('event_log_invisible_events', error);
        }
      },
    });
    new Gauge({
      name: 'event_log_invisible_oldest_seconds',
      help: 'Seconds since the oldest event not yet visible to subscribers was appended (0 when every event is visible)',
      registers: [this.registry],
      async collect() {
        try {
          this.set((await once()).oldestInvisibleSeconds);
        } catch (error) {
          this.remove();
          failed('event_log_invisible_oldest_seconds', error);
        }
      },
    });
    new Gauge({
      name: 'database_oldest_transaction_seconds',
      help: 'Age of the oldest transaction of the PostgreSQL cluster holding a transaction id (it holds the visible event log back), by its application_name and database; 0 with empty labels when there is none; where its start is hidden (another role, without pg_read_all_stats), the age of the oldest event it hides',
      labelNames: ['application_name', 'database'] as const,
      registers: [this.registry],
      async collect() {
        try {
          const visibility = await once();
          const oldest = visibility.oldestTransaction;
          this.reset();
          // An age the role may not see (another role's session, without pg_read_all_stats): at least as old as the
          // oldest event it hides, which was appended after it began; never 0, which no alert would see.
          const age = oldest === null ? 0 : (oldest.ageSeconds ?? visibility.oldestInvisibleSeconds);
          this.set({ application_name: oldest?.applicationName ?? '', database: oldest?.database ?? '' }, age);
        } catch (error) {
          this.reset();
          failed('database_oldest_transaction_seconds', error);
        }
      },
    });
    for (const gauge of ['event_log_invisible_events', 'event_log_invisible_oldest_seconds', 'database_oldest_transaction_seconds']) {
      this.collectFailures.inc({ gauge }, 0);
    }
  }

  /** webhook_queue_depth{status="pending"|"due"}, read at each scrape. */
  addWebhookQueueSource(read: () => Promise<WebhookQueueDepth>): void {
    const collectFailures = this.collectFailures;
    const log = this.log;
    new Gauge({
      name: 'webhook_queue_depth',
      help: 'Webhook deliveries waiting: pending (not yet delivered nor failed) and due (pending whose attempt is due now)',
      labelNames: ['status'] as const,
      registers: [this.registry],
      async collect() {
        try {
          const depth = await read();
          this.set({ status: 'pending' }, depth.pending);
          this.set({ status: 'due' }, depth.due);
        } catch (error) {
          this.reset();
          collectFailures.inc({ gauge: 'webhook_queue_depth' });
          log?.warn({ err: error }, 'webhook queue depth could not be read for /metrics');
        }
      },
    });
    for (const outcome of ['delivered', 'retry', 'failed', 'superseded'] as const) this.webhookAttempts.inc({ outcome }, 0);
    this.collectFailures.inc({ gauge: 'webhook_queue_depth' }, 0);
  }

  /** webhook_endpoints_disabled, read at each scrape (no number when it cannot be read). */
  addDisabledEndpointsSource(read: () => Promise<number>): void {
    const collectFailures = this.collectFailures;
    const log = this.log;
    new Gauge({
      name: 'webhook_endpoints_disabled',
      help: 'Projects whose webhook endpoint is disabled after every attempt failed for 3 days: their webhooks are recorded failed, not sent, until the operator enables it',
      registers: [this.registry],
      async collect() {
        try {
          this.set(await read());
        } catch (error) {
          this.remove();
          collectFailures.inc({ gauge: 'webhook_endpoints_disabled' });
          log?.warn({ err: error }, 'disabled webhook endpoints could not be read for /metrics');
        }
      },
    });
    this.collectFailures.inc({ gauge: 'webhook_endpoints_disabled' }, 0);
  }

  /** The text exposition format (Prometheus 0.0.4). */
  async exposition(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }
}
