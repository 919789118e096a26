import { Controller, Get, Param, Query, Res, UseGuards } from '@nestjs/common';
import { QueryBus } from '@nestjs/cqrs';
import type { FastifyReply } from 'fastify';
import { isUuid } from '#domain';
import { ListMerchantEvents } from '#payments/events';
import type { MerchantIdentity } from '#payments/merchants';
import { ApiError } from '../http/errors/api-error';
import { encodeCursor } from '../http/cursor';
import { periodPageOf } from '../http/period-page.request';
import { NoParameters, validRequest } from '../http/request-pipe';
import { Merchant, MerchantAuthGuard } from '../http/auth/merchant-auth.guard';
import { HeavyRead } from '../http/heavy-reads';
import { ListEventsQuery } from './list-events.request';

/** The project's webhook events of the key's mode, kept WEBHOOK_RETENTION_DAYS: what a receiver missed, without the operator. */
@Controller('v1/events')
@UseGuards(MerchantAuthGuard)
export class EventsController {
  constructor(private readonly queries: QueryBus) {}

  /** The last queued first (not by createdAt), cursor pages; each item is the webhook's body with its `deliveryStatus`. */
  @Get()
  @HeavyRead(ListEventsQuery, periodPageOf)
  async list(@Merchant() merchant: MerchantIdentity, @Query(validRequest) query: ListEventsQuery) {
    const page = await this.queries.execute(
      new ListMerchantEvents({
        projectId: merchant.project.id,
        isTest: merchant.mode === 'test',
        type: query.type,
        deliveryStatus: query.deliveryStatus,
        ...periodPageOf(query),
      }),
    );
    return {
      items: page.items.map((e) => ({ ...(JSON.parse(e.body) as object), deliveryStatus: e.deliveryStatus })),
      nextCursor: page.hasMore ? encodeCursor({ seq: page.items[page.items.length - 1]!.seq }) : null,
      hasMore: page.hasMore,
    };
  }

  /** One event: the body of its webhook, byte for byte (its id is the webhook's id). */
  @Get(':id')
  async get(@Merchant() merchant: MerchantIdentity, @Param('id') id: string, @Res() reply: FastifyReply, @Query(validRequest) _query: NoParameters) {
    const found = isUuid(id)
      ? await this.queries.execute(
          new ListMerchantEvents({ projectId: merchant.project.id, isTest: merchant.mode === 'test', id: id.toLowerCase(), before: null, limit: 1 }),
        )
      : null;
    const event = found?.items[0];
    if (!event) throw ApiError.notFound('not_found', 'Событие не найдено');
    return reply.type('application/json; charset=utf-8').send(event.body);
  }
}
