import { Body, Controller, Get, HttpCode, Inject, Param, Post, Query, UseGuards } from '@nestjs/common';
import { CommandBus, QueryBus } from '@nestjs/cqrs';
import type { Clock } from '#platform/clock';
import { ListWebhookDeliveries } from '#payments/webhooks';
import { EnableWebhookEndpoint, ResendFailedWebhookDeliveries, ResendWebhookDelivery } from '#payments/webhooks';
import { isUuid } from '#domain';
import { ApiError } from '../http/errors/api-error';
import { cursorSeqOf, encodeCursor, pageSizeOf } from '../http/cursor';
import { NoFieldsRequest, NoParameters, validOptionalBody, validRequest } from '../http/request-pipe';
import { ListWebhookDeliveriesQuery } from './list-webhook-deliveries.request';
import { CLOCK_TOKEN } from '../http/tokens';
import { AdminTokenGuard } from '../http/auth/admin-token.guard';

/** The webhook delivery history (every attempt) and resending, for the operator. */
@Controller('admin/v1')
@UseGuards(AdminTokenGuard)
export class WebhookDeliveriesController {
  constructor(
    private readonly commands: CommandBus,
    private readonly queries: QueryBus,
    @Inject(CLOCK_TOKEN) private readonly clock: Clock,
  ) {}

  /** Newest first; filtered by project and event kind; cursor pages. */
  @Get('webhook-deliveries')
  async list(@Query(validRequest) query: ListWebhookDeliveriesQuery) {
    const { projectId, eventType, eventId } = query;
    const limit = pageSizeOf(query.limit, 50);
    const before = cursorSeqOf(query.cursor);
    const { items: page, hasMore } = await this.queries.execute(new ListWebhookDeliveries({ projectId, eventType, eventId, before, limit }));
    return {
      items: page.map((r) => ({
        id: r.id,
        eventId: r.event_id,
        eventType: r.event_type,
        projectId: r.project_id,
        url: r.url,
        status: r.status,
        isTest: r.is_test,
        createdAt: r.created_at.toISOString(),
        nextAttemptAt: r.next_attempt_at?.toISOString() ?? null,
        attempts: r.attempts.map((a) => ({
          attempt: a.attempt,
          at: new Date(a.at).toISOString(),
          statusCode: a.status_code,
          body: a.body,
          durationMs: a.duration_ms,
          error: a.error,
          // The attempt came back after its lease was taken over or the delivery was
          // resent: kept in the history, but it did not decide the delivery's status.
          superseded: a.superseded,
        })),
      })),
      nextCursor: hasMore ? encodeCursor({ seq: Number(page[page.length - 1]!.seq) }) : null,
      hasMore,
    };
  }

  /** Sends the delivery again now (same id and body), with a fresh retry schedule. */
  @Post('webhook-deliveries/:id/resend')
  @HttpCode(202)
  async resend(@Param('id') id: string, @Query(validRequest) _query: NoParameters, @Body(validOptionalBody) _body: NoFieldsRequest) {
    const resent = isUuid(id) ? await this.commands.execute(new ResendWebhookDelivery(id.toLowerCase(), this.clock.now())) : null;
    if (!resent) throw ApiError.notFound('not_found', 'Доставка не найдена');
    return { id: resent.id, status: 'pending', nextAttemptAt: resent.nextAttemptAt.toISOString() };
  }

  /** Sends every failed delivery of the project again now (its receiver was fixed), each like a resend. */
  @Post('projects/:id/webhook-deliveries/resend-failed')
  @HttpCode(202)
  async resendFailed(@Param('id') id: string, @Query(validRequest) _query: NoParameters, @Body(validOptionalBody) _body: NoFieldsRequest) {
    const resent = isUuid(id) ? await this.commands.execute(new ResendFailedWebhookDeliveries(id.toLowerCase(), this.clock.now())) : null;
    if (resent === null) throw ApiError.notFound('not_found', 'Проект не найден');
    return { projectId: id.toLowerCase(), resent };
  }

  /** Re-enables the project's webhook endpoint disabled for failing, and resends every failed delivery (what is still owed). */
  @Post('projects/:id/webhook-endpoint/enable')
  @HttpCode(202)
  async enableEndpoint(@Param('id') id: string, @Query(validRequest) _query: NoParameters, @Body(validOptionalBody) _body: NoFieldsRequest) {
    const resent = isUuid(id) ? await this.commands.execute(new EnableWebhookEndpoint(id.toLowerCase(), this.clock.now())) : null;
    if (resent === null) throw ApiError.notFound('not_found', 'Проект не найден');
    return { projectId: id.toLowerCase(), resent };
  }
}
