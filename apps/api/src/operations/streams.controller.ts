import { Controller, Get, Inject, Param, Query, UseGuards } from '@nestjs/common';
import { RecordedEvent, StreamNotFoundError } from '#event-store';
import type { Infrastructure } from '#payments/composition';
import { ApiError } from '../http/errors/api-error';
import { storableText } from '../http/validation';
import { INFRASTRUCTURE } from '../http/tokens';
import { AdminTokenGuard } from '../http/auth/admin-token.guard';

const MAX_PAGE = 1000;
/** `<category>-<id>`, as the event store names streams. */
const STREAM_NAME = /^[a-z][a-z0-9_]*-[^]+$/;

/** Audit: the raw events of one stream, as stored, oldest first. */
@Controller('admin/v1/streams')
@UseGuards(AdminTokenGuard)
export class StreamsController {
  constructor(@Inject(INFRASTRUCTURE) private readonly infra: Infrastructure) {}

  @Get(':streamName')
  async read(@Param('streamName') streamName: string, @Query('fromRevision') fromRevision?: string, @Query('limit') limit?: string) {
    const from = parseNonNegative(fromRevision, 'fromRevision', 0);
    const max = parseNonNegative(limit, 'limit', 100);
    if (max < 1 || max > MAX_PAGE) {
      throw ApiError.validation([{ param: 'limit', code: 'out_of_range', message: `limit: от 1 до ${MAX_PAGE}` }]);
    }
    // No stream has such a name (no `<category>-<id>`, or a NUL PostgreSQL cannot even compare): nothing to read.
    if (!STREAM_NAME.test(streamName) || !storableText(streamName)) throw ApiError.notFound('not_found', 'Поток не найден');
    try {
      const events = await this.infra.store.readStream(streamName, { fromRevision: BigInt(from), maxCount: max + 1 });
      const page = events.slice(0, max);
      return {
        streamName,
        events: page.map(toWire),
        nextRevision: events.length > max ? Number(page[page.length - 1]!.revision) + 1 : null,
      };
    } catch (error) {
      if (error instanceof StreamNotFoundError) throw ApiError.notFound('not_found', `Поток ${streamName} не найден`);
      throw error;
    }
  }
}

function parseNonNegative(value: string | undefined, param: string, fallback: number): number {
  if (value === undefined) return fallback;
  if (!/^\d{1,15}$/.test(value)) {
    throw ApiError.validation([{ param, code: 'invalid', message: `${param}: неотрицательное целое число` }]);
  }
  return Number(value);
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
