import type { Pool, PoolClient } from 'pg';
import type { Clock } from '#platform/clock';
import { AllFilter, comparePositions, EventStore, Position, RecordedEvent, StreamNotFoundError } from '#event-store';
import {
  evolveInvoice,
  initialInvoice,
  INVOICE_CATEGORY,
  InvoiceEvent,
  InvoiceState,
  invoiceStreamName,
  PAYOUT_CATEGORY,
  evolvePayout,
  initialPayout,
  PayoutEvent,
  PayoutState,
  REFUND_CATEGORY,
  refundDecider,
  RefundEvent,
  RefundState,
  refundStreamName,
} from '#domain';
import { uuidV5 } from '#ledger';
import { invoiceView, payoutView, refundView } from '..';
import type { Projection } from '#event-store/projections';
import type { Project, Registry, WebhookEventKind } from '../merchants';
import { REFUND_RECORDS_ON_INVOICE, WEBHOOK_SOURCE_EVENT_TYPES, webhookKindOf } from './webhook-rules';
import { DEFAULT_WEBHOOK_RETENTION_DAYS, retentionHorizon } from './webhook-retention';
import { recordMerchantEvents } from '../events/merchant-events';

/** What a webhook says, before it is addressed to projects. */
export interface WebhookMessage {
  readonly kind: WebhookEventKind;
  /** The envelope: {id, type, createdAt, isTest, data}. */
  readonly envelope: { id: string; type: WebhookEventKind; createdAt: string; isTest: boolean; data: Record<string, unknown> };
  /** The projects it is meant for (before their subscriptions are checked). */
  readonly projects: readonly Project[];
  /** Meant for every project of the account (a payout's): not for one created after the event. */
  readonly accountWide?: boolean;
}

const NAMESPACE = Buffer.from('3b0e9c1d5a7f4e2b8c6d1f0a9e8b7c6d', 'hex');
/** One delivery per event and project, whoever enqueues it and however often. */
export const deliveryIdOf = (eventId: string, projectId: string): string => uuidV5(NAMESPACE, `${eventId}|${projectId}`);

/** The events of a stream up to and including `revision`, folded. */
async function stateAt<S, E>(store: EventStore, stream: string, revision: bigint, initial: S, evolve: (s: S, e: E) => S): Promise<S> {
  const events = await store.readStream(stream, { maxCount: Number(revision) + 1 });
  return events.reduce((s, e) => evolve(s, { type: e.type, data: e.data } as unknown as E), initial);
}

/** A stream's events, none when it does not exist (yet). */
async function eventsOf(store: EventStore, stream: string): Promise<RecordedEvent[]> {
  try {
    return await store.readStream(stream);
  } catch (error) {
    if (error instanceof StreamNotFoundError) return [];
    throw error;
  }
}

/**
 * Builds the webhook of one stored event: the invoice, refund or payout as it was
 * when the event happened (so a replay renders the same thing), in the shapes of
 * the merchant API; null when the event is no webhook (or not yet one).
 *
 * A refund's webhook (its id the id of the refund's outcome, RefundSucceeded or
 * RefundFailed) shows the invoice as that outcome left it, read from the log: it is
 * rendered once the invoice has recorded the outcome too (InvoiceRefunded or
 * InvoiceRefundReleased for that refund), from whichever of the two events comes
 * later in the log; from the earlier one only if the later is already there. The
 * later always finds the earlier (it is committed before), so the webhook is never
 * missed, and both render the same body under the same id (decision 0157).
 */
export async function renderWebhook(store: EventStore, registry: Registry, recorded: RecordedEvent, publicUrl: () => string): Promise<WebhookMessage | null> {
  if (recorded.streamName.startsWith(`${INVOICE_CATEGORY}-`) && REFUND_RECORDS_ON_INVOICE.includes(recorded.type)) {
    const d = recorded.data as { invoiceId: string; refundId: string; reason?: string };
    // Refused for want of balance: no refund stream, never a webhook, nothing to read (a merchant retrying a refund
    // makes these without bound, and each read the whole invoice stream).
    if (recorded.type === 'InvoiceRefundReleased' && d.reason === 'refused') return null;
    // The invoice up to this record of the refund: the records after it are not its.
    return renderRefundOutcome(store, registry, d.refundId, d.invoiceId, publicUrl, Number(recorded.revision) + 1);
  }
  const kind = webhookKindOf(recorded.streamName, recorded.type);
  if (!kind) return null;
  const envelope = (createdAt: string, isTest: boolean, data: Record<string, unknown>) => ({ id: recorded.id, type: kind, createdAt, isTest, data });
  if (recorded.streamName.startsWith(`${INVOICE_CATEGORY}-`)) {
    const invoice = await stateAt<InvoiceState, InvoiceEvent>(store, recorded.streamName, recorded.revision, initialInvoice(), evolveInvoice);
    if (invoice.status === 'none') return null;
    const event = { type: recorded.type, data: recorded.data } as InvoiceEvent;
    const at = event.type === 'InvoicePaid' ? event.data.paidAt : (event.data as { at: string }).at;
    const project = await registry.project(invoice.created.projectId);
    return {
      kind,
      envelope: envelope(at, invoice.created.mode === 'test', { invoice: invoiceView(invoice, publicUrl()) }),
      projects: project ? [project] : [],
    };
  }
  if (recorded.streamName.startsWith(`${REFUND_CATEGORY}-`)) {
    const d = recorded.data as { invoiceId: string; refundId: string };
    return renderRefundOutcome(store, registry, d.refundId, d.invoiceId, publicUrl);
  }
  if (recorded.streamName.startsWith(`${PAYOUT_CATEGORY}-`)) {
    const payout = await stateAt<PayoutState, PayoutEvent>(store, recorded.streamName, recorded.revision, initialPayout(), evolvePayout);
    if (payout.status === 'none') return null;
    const at = (recorded.data as { at: string }).at;
    // Payout events go to every project of the account (payouts belong to the account).
    const projects = await registry.projectsOfAccount(payout.requested.accountId);
    return { kind, envelope: envelope(at, false, { payout: payoutView(payout) }), projects, accountWide: true };
  }
  return null;
}

/**
 * A refund's webhook once both its outcome (on the refund's stream) and the invoice's
 * record of it are in the log: the refund folded up to its outcome, the invoice up to
 * its record of it. Null while either is missing (the other event renders it).
 */
async function renderRefundOutcome(
  store: EventStore,
  registry: Registry,
  refundId: string,
  invoiceId: string,
  publicUrl: () => string,
  /** How many of the invoice's first events to read, when its record of the refund is known to be among them. */
  invoiceEventsUpTo?: number,
): Promise<WebhookMessage | null> {
  const invoiceEvents = await store.readStream(invoiceStreamName(invoiceId), invoiceEventsUpTo === undefined ? undefined : { maxCount: invoiceEventsUpTo });
  let invoice = initialInvoice();
  let recordedOnInvoice = false;
  for (const e of invoiceEvents) {
    invoice = evolveInvoice(invoice, { type: e.type, data: e.data } as InvoiceEvent);
    if (REFUND_RECORDS_ON_INVOICE.includes(e.type) && (e.data as { refundId: string }).refundId === refundId) {
      recordedOnInvoice = true;
      break;
    }
  }
  if (!recordedOnInvoice || invoice.status === 'none') return null;
  const refundEvents = await eventsOf(store, refundStreamName(refundId));
  // A refund has one outcome (RefundSucceeded or RefundFailed): the first event that is a webhook.
  const outcomeAt = refundEvents.findIndex((e) => webhookKindOf(e.streamName, e.type) !== null);
  if (outcomeAt < 0) return null;
  const outcome = refundEvents[outcomeAt]!;
  const kind = webhookKindOf(outcome.streamName, outcome.type)!;
  const refund = refundEvents
    .slice(0, outcomeAt + 1)
    .reduce<RefundState>((s, e) => refundDecider.evolve(s, { type: e.type, data: e.data } as unknown as RefundEvent), refundDecider.initialState());
  if (refund.status === 'none') return null;
  const c = refund.created;
  const project = await registry.project(c.projectId);
  return {
    kind,
    envelope: {
      id: outcome.id,
      type: kind,
      createdAt: (outcome.data as { at: string }).at,
      isTest: c.mode === 'test',
      data: { refund: refundView(refund), invoice: invoiceView(invoice, publicUrl()) },
    },
    projects: project ? [project] : [],
  };
}

/** One delivery to enqueue: rendered and addressed before the outbox's write transaction. */
export interface PlannedDelivery {
  readonly id: string;
  readonly eventId: string;
  readonly kind: WebhookEventKind;
  readonly projectId: string;
  /** Null: the project is not subscribed (the event is only recorded for it, GET /v1/events). */
  readonly url: string | null;
  readonly body: string;
  readonly isTest: boolean;
  readonly createdAt: string;
  /** The event it is rendered from, and whether it happened before the retention period (its delivery may have been swept). */
  readonly position: Position;
  readonly pastRetention: boolean;
}

/**
 * The webhook outbox: follows the log and enqueues one delivery per webhook event
 * and subscribed project (its webhookUrl set and the kind among its webhookEvents),
 * and records the event for every project it is meant for (merchant_events).
 * Its queue is never emptied by a rebuild: replaying the log enqueues nothing twice
 * (delivery ids are derived from event and project), so nothing is sent again; and
 * an event it reached before (webhook_outbox_reach) that is older than the retention
 * period, whose delivery the retention sweeper may have deleted, is not enqueued again.
 *
 * Rendering reads other streams and the registry: it happens in `prepare`, before the
 * batch's transaction opens, and the transaction only inserts the rendered rows (an
 * open write transaction would hide every newer event from every subscriber while it
 * waited on those reads).
 */
export const WEBHOOK_OUTBOX = 'webhook_outbox';

/** What of the log the outbox reads. */
export const WEBHOOK_OUTBOX_FILTER: AllFilter = {
  streamNamePrefixes: [`${INVOICE_CATEGORY}-`, `${REFUND_CATEGORY}-`, `${PAYOUT_CATEGORY}-`],
  eventTypePrefixes: [...WEBHOOK_SOURCE_EVENT_TYPES, ...REFUND_RECORDS_ON_INVOICE],
};

export function webhookOutbox(
  store: EventStore,
  registry: Registry,
  clock: Clock,
  publicUrl: () => string,
  /** WEBHOOK_RETENTION_DAYS: an event older than this is not enqueued again (its delivery may have been swept already). */
  retentionDays: number = DEFAULT_WEBHOOK_RETENTION_DAYS,
): Projection<PlannedDelivery[]> {
  return {
    name: WEBHOOK_OUTBOX,
    tables: [],
    filter: WEBHOOK_OUTBOX_FILTER,
    async prepare(events: readonly RecordedEvent[]): Promise<PlannedDelivery[]> {
      const now = clock.now();
      // A refund's webhook rendered from both its events when the batch holds both: planned once.
      const eventIds = new Set<string>();
      const addressed: { message: WebhookMessage; body: string; project: Project; position: Position }[] = [];
      const horizon = retentionHorizon(now, retentionDays).getTime();
      for (const recorded of events) {
        const message = await renderWebhook(store, registry, recorded, publicUrl);
        if (!message) continue;
        // Compared with the reach by the later event it is rendered from: a refund's webhook, which the earlier of its
        // two events met the other missing (a checkpoint moved back since), is never lost (at most sent again, its id).
        if (eventIds.has(message.envelope.id)) {
          for (const a of addressed) if (a.message.envelope.id === message.envelope.id) a.position = recorded.position;
          continue;
        }
        eventIds.add(message.envelope.id);
        const body = JSON.stringify(message.envelope);
        for (const project of message.projects) addressed.push({ message, body, project, position: recorded.position });
      }
      // Addressed with the settings in force when the event happened (a change made since applies to later events),
      // read for the whole batch at once.
      const settingsAt = await registry.webhookSettingsAt(
        addressed.map(({ message, project }) => ({ projectId: project.id, at: new Date(message.envelope.createdAt) })),
      );
      const planned: PlannedDelivery[] = [];
      for (const [i, { message, body, project, position }] of addressed.entries()) {
        // None recorded (a project written by hand in SQL): its settings now.
        const settings = settingsAt[i] ?? { ...project, existed: true };
        if (!settings.existed && message.accountWide) continue; // a project created after the payout's event
        const subscribed = settings.webhookUrl !== null && settings.webhookEvents.includes(message.kind);
        planned.push({
          id: deliveryIdOf(message.envelope.id, project.id),
          eventId: message.envelope.id,
          kind: message.kind,
          projectId: project.id,
          url: subscribed ? settings.webhookUrl : null,
          body,
          isTest: message.envelope.isTest,
          createdAt: message.envelope.createdAt,
          position,
          pastRetention: Date.parse(message.envelope.createdAt) < horizon,
        });
      }
      return planned;
    },
    async apply(tx: PoolClient, recorded: readonly RecordedEvent[], all: PlannedDelivery[]) {
      // An event the outbox reached before (its checkpoint moved back by hand) that is older than the retention period
      // is not enqueued again: its delivery may have been swept, and must not be sent twice. One never reached is, however
      // old (a projector stopped longer than the period): a webhook is never lost.
      const reach = await reachOfTheOutbox(tx, recorded);
      const events = all.filter((d) => !(d.pastRetention && reach !== null && comparePositions(d.position, reach) <= 0));
      // One time for the records and the deliveries: an event's record is swept no later than its delivery.
      const now = clock.now();
      await recordMerchantEvents(
        tx,
        events.map((d) => ({ ...d, deliveryId: d.url === null ? null : d.id })),
        now,
      );
      const planned = events.filter((d): d is PlannedDelivery & { url: string } => d.url !== null);
      if (planned.length === 0) return;
      // In log order, so the queue's seq keeps the order of the events; each new delivery
      // both recorded and queued (one already there is neither). A project whose endpoint
      // is disabled (endpoint-health.ts) gets it recorded as failed, not queued.
      await tx.query(
        `WITH enqueued AS (
           INSERT INTO webhook_deliveries (id, event_id, event_type, project_id, url, body, is_test, status, next_attempt_at, created_at)
           SELECT d.id, d.event_id, d.event_type, d.project_id, d.url, d.body, d.is_test,
                  CASE WHEN p.webhook_disabled_at IS NULL THEN 'pending' ELSE 'failed' END, CASE WHEN p.webhook_disabled_at IS NULL THEN $8::timestamptz END, $8
           FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::uuid[], $5::text[], $6::text[], $7::boolean[]) WITH ORDINALITY
             AS d(id, event_id, event_type, project_id, url, body, is_test, ord)
           LEFT JOIN projects p ON p.id = d.project_id
           ORDER BY d.ord
           ON CONFLICT (id) DO NOTHING
           RETURNING id, seq, url, next_attempt_at, status)
         INSERT INTO webhook_queue (id, seq, url, next_attempt_at, attempts_made, schedule_base)
         SELECT id, seq, url, next_attempt_at, 0, 0 FROM enqueued WHERE status = 'pending'`,
        [
          planned.map((d) => d.id),
          planned.map((d) => d.eventId),
          planned.map((d) => d.kind),
          planned.map((d) => d.projectId),
          planned.map((d) => d.url),
          planned.map((d) => d.body),
          planned.map((d) => d.isTest),
          now,
        ],
      );
    },
  };
}

/**
 * The furthest position the outbox had reached before this batch (null: none yet), moved to the batch's last event,
 * locked for the batch's transaction. The checkpoint can be moved back by hand; this is not.
 */
async function reachOfTheOutbox(tx: PoolClient, recorded: readonly RecordedEvent[]): Promise<Position | null> {
  const before = await tx.query<{ commit_position: string; prepare_position: string }>(
    'SELECT commit_position, prepare_position FROM webhook_outbox_reach FOR UPDATE',
  );
  const reach = before.rows[0] ? { commit: BigInt(before.rows[0].commit_position), prepare: BigInt(before.rows[0].prepare_position) } : null;
  const last = recorded.at(-1)?.position;
  if (last !== undefined && (reach === null || comparePositions(last, reach) > 0)) await moveOutboxReach(tx, last);
  return reach;
}

/** Moves the outbox's reach forward to `to` (never back): also for a load that leaves its history's past unsent. */
export async function moveOutboxReach(db: Pick<PoolClient, 'query'>, to: Position): Promise<void> {
  await db.query(
    `INSERT INTO webhook_outbox_reach (commit_position, prepare_position) VALUES ($1, $2)
     ON CONFLICT (singleton) DO UPDATE SET commit_position = $1, prepare_position = $2
     WHERE (webhook_outbox_reach.commit_position, webhook_outbox_reach.prepare_position) < ($1::numeric, $2::numeric)`,
    [to.commit.toString(), to.prepare.toString()],
  );
}

/** A row of the delivery history, with its attempts in order. */
export interface WebhookDeliveryRow {
  seq: string;
  id: string;
  event_id: string;
  event_type: string;
  project_id: string;
  url: string;
  status: string;
  is_test: boolean;
  attempts_made: number;
  next_attempt_at: Date | null;
  created_at: Date;
  attempts: { attempt: number; at: string; status_code: number | null; body: string | null; duration_ms: number; error: string | null; superseded: boolean }[];
}

/** What the operator's delivery history asks for. */
export interface WebhookDeliveryFilter {
  readonly projectId?: string;
  readonly eventType?: WebhookEventKind;
  readonly eventId?: string;
  /** Only rows below this seq (the previous page's cursor), or null for the first page. */
  readonly before: number | null;
  readonly limit: number;
}

/** A page of the deliveries written by the outbox, newest first, each with every attempt. */
export async function listWebhookDeliveries(
  pool: Pick<Pool, 'query'>,
  filter: WebhookDeliveryFilter,
): Promise<{ readonly items: readonly WebhookDeliveryRow[]; readonly hasMore: boolean }> {
  const where: string[] = [];
  const params: unknown[] = [];
  const add = (sql: string, value: unknown) => {
    params.push(value);
    where.push(sql.replace('?', `$${params.length}`));
  };
  if (filter.projectId !== undefined) add('d.project_id = ?', filter.projectId);
  if (filter.eventType !== undefined) add('d.event_type = ?', filter.eventType);
  if (filter.eventId !== undefined) add('d.event_id = ?', filter.eventId);
  if (filter.before !== null) add('d.seq < ?', filter.before);
  params.push(filter.limit + 1);
  const rows = await pool.query<WebhookDeliveryRow>(
    `SELECT d.seq, d.id, d.event_id, d.event_type, d.project_id, d.url, d.status, d.is_test, d.attempts_made, d.next_attempt_at, d.created_at,
            COALESCE((SELECT json_agg(json_build_object('attempt', a.attempt, 'at', a.at, 'status_code', a.status_code, 'body', a.body,
                                                        'duration_ms', a.duration_ms, 'error', a.error, 'superseded', a.superseded) ORDER BY a.attempt)
                      FROM webhook_attempts a WHERE a.delivery_id = d.id), '[]') AS attempts
     FROM webhook_deliveries d ${where.length ? `WHERE ${where.join(' AND ')}` : ''}
     ORDER BY d.seq DESC LIMIT $${params.length}`,
    params,
  );
  return { items: rows.rows.slice(0, filter.limit), hasMore: rows.rows.length > filter.limit };
}
