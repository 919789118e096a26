import { Controller, Get, Param, Query, UseGuards } from '@nestjs/common';
import { QueryBus } from '@nestjs/cqrs';
import type { RecordedEvent } from '#event-store';
import { ReadStream } from '#payments/streams';
import { ApiError } from '../http/errors/api-error';
import { validRequest } from '../http/request-pipe';
import { storableText } from '../http/request-rules';
import { AdminTokenGuard } from '../http/auth/admin-token.guard';
import { pageSizeOf } from '../http/cursor';
import { ReadStreamQuery } from './read-stream.request';

/** `<category>-<id>`, as the event store names streams. */
const STREAM_NAME = /^[a-z][a-z0-9_]*-[^]+$/;

/** Audit: the raw events of one stream, as stored, oldest first. */
@Controller('admin/v1/streams')
@UseGuards(AdminTokenGuard)
export class StreamsController {
  constructor(private readonly queries: QueryBus) {}

  @Get(':streamName')
  async read(@Param('streamName') streamName: string, @Query(validRequest) query: ReadStreamQuery) {
    // No stream has such a name (no `<category>-<id>`, or a NUL PostgreSQL cannot even compare): nothing to read.
    if (!STREAM_NAME.test(streamName) || !storableText(streamName)) throw ApiError.notFound('not_found', 'Поток не найден');
    const page = await this.queries.execute(new ReadStream(streamName, BigInt(query.fromRevision ?? '0'), pageSizeOf(query.limit, 100)));
    if (!page) throw ApiError.notFound('not_found', `Поток ${streamName} не найден`);
    return {
      streamName,
      events: page.events.map(toWire),
      nextRevision: page.nextRevision === null ? null : Number(page.nextRevision),
    };
  }
}

const toWire = (e: RecordedEvent) => ({
  id: e.id,
  type: e.type,
  revision: Number(e.revision),
  position: `${e.position.commit}/${e.position.prepare}`,
  createdAt: e.createdAt.toISOString(),
  data: e.data,
  metadata: e.metadata,
});
