import type { AllStreamSubscription, Position as ClientPosition } from '@eventstore/db-client';
import { AllFilter, AllSubscription, comparePositions, matchesFilter, Position, RecordedEvent, SubscriptionBatch } from '../event-store';
import { ClientResolvedEvent, isSystemEvent, toPosition, toRecordedEvent } from './mapping';

/** What a subscription source yields, in log order. */
export type SubscriptionItem =
  | { readonly kind: 'event'; readonly event: RecordedEvent }
  /** The server looked at the log up to here (events past the filter were skipped). */
  | { readonly kind: 'checkpoint'; readonly position: Position }
  /** The subscription reached the end of the log and is live. */
  | { readonly kind: 'caughtUp' }
  /** The subscription fell behind the live log and is catching up again. */
  | { readonly kind: 'fellBehind' };

type SubscriptionMarkerItem = Exclude<SubscriptionItem, { kind: 'event' }>;

/**
 * The client reports checkpoints (a callback) and caught-up / fell-behind (events)
 * out of band from the events, which reach us through the stream's buffer: a
 * checkpoint may be reported while events before it still sit in that buffer, and
 * a consumer that saved it before handling them would skip them on restart. Both
 * are reported from inside the client's transform of the server's message, so
 * pushing a marker into the same stream at that moment puts it in log order, after
 * every event the server sent before it.
 */
const MARKER = Symbol('eventstoredb-subscription-marker');
interface SubscriptionMarker {
  readonly [MARKER]: SubscriptionMarkerItem;
}
const marker = (item: SubscriptionMarkerItem): SubscriptionMarker => ({ [MARKER]: item });
const isMarker = (chunk: unknown): chunk is SubscriptionMarker => typeof chunk === 'object' && chunk !== null && MARKER in chunk;

function pushMarker(target: AllStreamSubscription, item: SubscriptionMarkerItem): void {
  // The checks keep a late report from pushing into a finished stream (which would emit an error).
  if (target.destroyed || target.readableEnded) return;
  target.push(marker(item));
}

/** The `checkpointReached` of a subscription's filter: a checkpoint marker, in log order (none for a checkpoint without a position). */
export function pushCheckpointMarker(subscription: AllStreamSubscription, position: ClientPosition): void {
  const checkpoint = toPosition(position);
  if (checkpoint) pushMarker(subscription, { kind: 'checkpoint', position: checkpoint });
}

export interface ClientSubscriptionOptions extends BatchSubscriptionOptions {
  /**
   * Called when the server says the subscription caught up, with the position up to
   * which events and checkpoints were handed over: answers where the checkpoint may
   * move to (caughtUpCheckpoint), or null. Its checkpoint goes before the caught-up, so
   * a caught-up batch carries it. A failure ends the subscription with it (the consumer
   * resubscribes from its last checkpoint).
   */
  readonly confirmCaughtUp?: (from: Position | 'start') => Promise<Position | null>;
}

/**
 * The port's subscription over a subscription of the client whose filter reports
 * checkpoints with pushCheckpointMarker.
 */
export function batchClientSubscription(client: AllStreamSubscription, options: ClientSubscriptionOptions): AllSubscription {
  // Sent by servers 23.10 and later. An older server never says so, and batches then
  // never carry caughtUp: true (a stand-in such as "no event for a while" would lie
  // to a consumer that is far behind on a slow link).
  client.on('caughtUp', () => pushMarker(client, { kind: 'caughtUp' }));
  client.on('fellBehind', () => pushMarker(client, { kind: 'fellBehind' }));
  return batchSubscription(subscriptionItems(client, options.after, options.confirmCaughtUp), {
    ...options,
    onClose: async () => {
      try {
        await options.onClose?.();
      } finally {
        await client.unsubscribe().catch(() => undefined);
        // Cancelling the gRPC call does not end the client's stream: destroy it, so
        // that the read ahead (subscriptionItems) finishes.
        client.destroy();
      }
    },
  });
}

async function* subscriptionItems(
  client: AllStreamSubscription,
  after: Position | 'start',
  confirmCaughtUp: ClientSubscriptionOptions['confirmCaughtUp'],
): AsyncGenerator<SubscriptionItem> {
  // How far the items yielded so far reach: every event the subscription hands over up
  // to here has been yielded (events and checkpoints come in log order).
  let reached: Position | 'start' = after;
  const reach = (position: Position) => {
    if (reached === 'start' || comparePositions(position, reached) > 0) reached = position;
  };
  // The stream holds the client's resolved events and our markers.
  for await (const chunk of client as AsyncIterable<ClientResolvedEvent | SubscriptionMarker>) {
    if (isMarker(chunk)) {
      const item = chunk[MARKER];
      if (item.kind === 'checkpoint') reach(item.position);
      if (item.kind === 'caughtUp' && confirmCaughtUp) {
        const confirmed = await confirmCaughtUp(reached);
        if (confirmed) {
          reach(confirmed);
          yield { kind: 'checkpoint', position: confirmed };
        }
      }
      yield item;
    } else if (chunk.event) {
      const event = toRecordedEvent(chunk.event);
      reach(event.position);
      yield { kind: 'event', event };
    }
  }
}

export interface BatchSubscriptionOptions {
  /** Exclusive start of the subscription. */
  readonly after: Position | 'start';
  readonly maxBatchSize: number;
  /** Applied to every event (again: the server filter may be coarser); system events are always left out. */
  readonly filter?: AllFilter;
  /**
   * How many items are read ahead of the consumer before the source stops being
   * pulled (it is then paused: the client's stream stops reading from gRPC, whose
   * flow control holds the server). Default: twice maxBatchSize.
   */
  readonly highWaterMark?: number;
  /** Called once when the subscription ends (unsubscribe, end or failure of the source); must make the source finish. */
  readonly onClose?: () => Promise<void> | void;
}

/**
 * Groups the items of a subscription source into the port's batches. The source is
 * read ahead into a bounded buffer; each next() hands over everything buffered (up
 * to maxBatchSize events), or waits for the next item. A batch is handed over when
 * it has events, when its checkpoint moved (events skipped by the filter, a server
 * checkpoint), or when caught-up changed. `caughtUp` is true when the server said
 * the subscription is live (and did not say it fell behind since) and nothing is
 * left in the buffer after this batch. Events at or before the last event handed
 * over are dropped (the subscription is exclusive of `after`), and the checkpoint
 * never moves backwards. A failure of the source is thrown by next() once the
 * items received before it have been handed over.
 */
export function batchSubscription(source: AsyncIterable<SubscriptionItem>, options: BatchSubscriptionOptions): AllSubscription {
  const maxBatchSize = Math.max(1, Math.floor(options.maxBatchSize));
  const highWaterMark = Math.max(1, options.highWaterMark ?? 2 * maxBatchSize);
  const start: Position = options.after === 'start' ? { commit: 0n, prepare: 0n } : options.after;

  const buffer: SubscriptionItem[] = [];
  let sourceEnded = false;
  let failure: { error: unknown } | null = null;
  let closed = false;
  let closing: Promise<void> | null = null;
  let consumerWaiting: Array<() => void> = [];
  let producerWaiting: (() => void) | null = null;

  let checkpoint = start;
  let lastEvent: Position | null = options.after === 'start' ? null : options.after;
  let live = false;
  let handedCheckpoint = start;
  let handedCaughtUp = false;

  const wakeConsumer = () => {
    const waiting = consumerWaiting;
    consumerWaiting = [];
    for (const wake of waiting) wake();
  };
  const wakeProducer = () => {
    const wake = producerWaiting;
    producerWaiting = null;
    wake?.();
  };

  const readAhead = (async () => {
    const iterator = source[Symbol.asyncIterator]();
    try {
      while (!closed) {
        if (buffer.length >= highWaterMark) {
          await new Promise<void>((resolve) => (producerWaiting = resolve));
          continue;
        }
        const next = await iterator.next();
        if (next.done || closed) break;
        buffer.push(next.value);
        wakeConsumer();
      }
    } catch (error) {
      if (!closed) failure = { error };
    } finally {
      sourceEnded = true;
      wakeConsumer();
    }
    // Left because of unsubscribe while the source sits at a yield: let it run its finally blocks.
    if (closed && !failure) await iterator.return?.().catch(() => undefined);
  })();

  const close = (): Promise<void> => {
    if (!closing) {
      closed = true;
      buffer.length = 0;
      wakeProducer();
      wakeConsumer();
      closing = (async () => {
        try {
          await options.onClose?.();
        } finally {
          await readAhead;
        }
      })();
    }
    return closing;
  };

  const takeBatch = (): SubscriptionBatch | null => {
    const events: RecordedEvent[] = [];
    let taken = 0;
    while (taken < buffer.length && events.length < maxBatchSize) {
      const item = buffer[taken++]!;
      switch (item.kind) {
        case 'event': {
          const position = item.event.position;
          if (lastEvent !== null && comparePositions(position, lastEvent) <= 0) break;
          lastEvent = position;
          if (comparePositions(position, checkpoint) > 0) checkpoint = position;
          if (!isSystemEvent({ streamId: item.event.streamName, type: item.event.type }) && matchesFilter(options.filter, item.event)) {
            events.push(item.event);
          }
          break;
        }
        case 'checkpoint':
          if (comparePositions(item.position, checkpoint) > 0) checkpoint = item.position;
          break;
        case 'caughtUp':
          live = true;
          break;
        case 'fellBehind':
          live = false;
          break;
      }
    }
    buffer.splice(0, taken);
    if (taken > 0) wakeProducer();
    const caughtUp = live && buffer.length === 0;
    if (events.length === 0 && comparePositions(checkpoint, handedCheckpoint) <= 0 && caughtUp === handedCaughtUp) return null;
    handedCheckpoint = checkpoint;
    handedCaughtUp = caughtUp;
    return { events, checkpoint, caughtUp };
  };

  const done: IteratorReturnResult<undefined> = { done: true, value: undefined };
  const iterator: AsyncIterator<SubscriptionBatch> = {
    async next(): Promise<IteratorResult<SubscriptionBatch>> {
      for (;;) {
        if (closed) return done;
        const batch = takeBatch();
        if (batch) return { done: false, value: batch };
        if (sourceEnded) {
          const failed = failure;
          await close();
          if (failed) throw failed.error;
          return done;
        }
        await new Promise<void>((resolve) => consumerWaiting.push(resolve));
      }
    },
    async return(): Promise<IteratorResult<SubscriptionBatch>> {
      await close();
      return done;
    },
  };

  return {
    [Symbol.asyncIterator]: () => iterator,
    unsubscribe: close,
  };
}
