import { Inject } from '@nestjs/common';
import { IQueryHandler, Query, QueryHandler } from '@nestjs/cqrs';
import type { EventStore, RecordedEvent } from '#event-store';
import { StreamNotFoundError } from '#event-store';
import { EVENT_STORE } from '../payments.tokens';

/** A page of one stream's events, as stored, oldest first; `nextRevision` is where the next page starts (null at the end). */
export interface StreamPage {
  readonly events: readonly RecordedEvent[];
  readonly nextRevision: bigint | null;
}

/** Audit: the raw events of one stream from `fromRevision`, at most `limit` of them; null when there is no such stream. */
export class ReadStream extends Query<StreamPage | null> {
  constructor(
    readonly streamName: string,
    readonly fromRevision: bigint,
    readonly limit: number,
  ) {
    super();
  }
}

@QueryHandler(ReadStream)
export class ReadStreamHandler implements IQueryHandler<ReadStream> {
  constructor(@Inject(EVENT_STORE) private readonly store: EventStore) {}

  async execute({ streamName, fromRevision, limit }: ReadStream): Promise<StreamPage | null> {
    try {
      // One more than asked: whether a next page exists, without a second read.
      const events = await this.store.readStream(streamName, { fromRevision, maxCount: limit + 1 });
      const page = events.slice(0, limit);
      return { events: page, nextRevision: events.length > limit ? page[page.length - 1]!.revision + 1n : null };
    } catch (error) {
      if (error instanceof StreamNotFoundError) return null;
      throw error;
    }
  }
}
