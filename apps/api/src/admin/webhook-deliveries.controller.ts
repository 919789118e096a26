import { Controller, Get, HttpCode, Inject, Param, Post, UseGuards } from '@nestjs/common';
import type { Pool } from 'pg';
import type { Clock } from '../../../../libs/clock/src';
import { resendDelivery } from '../../../../libs/webhooks/src';
import { ApiError } from '../errors/api-error';
import { encodeCursor } from '../http/cursor';
import { ValidQuery } from '../http/request-validation';
import { cursorSeqOf, pageSizeOf } from '../invoices/list-invoices.request';
import { ListWebhookDeliveriesQuery } from '../webhooks/list-webhook-deliveries.request';
import { isUuid } from '../http/validation';
import { CLOCK_TOKEN, DATABASE_POOL } from '../tokens';
import { AdminTokenGuard } from './admin-token.guard';

interface DeliveryRow {
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

/** The webhook delivery history (every attempt) and resending, for the operator. */
@Controller('admin/v1/webhook-deliveries')
@UseGuards(AdminTokenGuard)
export class WebhookDeliveriesController {
  constructor(
    @Inject(DATABASE_POOL) private readonly pool: Pool,
    @Inject(CLOCK_TOKEN) private readonly clock: Clock,
  ) {}

  /** Newest first; filtered by project and event kind; cursor pages. */
  @Get()
  async list(@ValidQuery(ListWebhookDeliveriesQuery) query: ListWebhookDeliveriesQuery) {
    const { projectId, eventType, eventId } = query;
    const limit = pageSizeOf(query.limit, 50);
    const before = cursorSeqOf(query.cursor);
    const where: string[] = [];
    const params: unknown[] = [];
    const add = (sql: string, value: unknown) => {
      params.push(value);
      where.push(sql.replace('?', `$${params.length}`));
    };
    if (projectId !== undefined) add('d.project_id = ?', projectId);
    if (eventType !== undefined) add('d.event_type = ?', eventType);
    if (eventId !== undefined) add('d.event_id = ?', eventId);
    if (before !== null) add('d.seq < ?', before);
    params.push(limit + 1);
    const rows = await this.pool.query<DeliveryRow>(
      `SELECT d.seq, d.id, d.event_id, d.event_type, d.project_id, d.url, d.status, d.is_test, d.attempts_made, d.next_attempt_at, d.created_at,
              COALESCE((SELECT json_agg(json_build_object('attempt', a.attempt, 'at', a.at, 'status_code', a.status_code, 'body', a.body,
                                                          'duration_ms', a.duration_ms, 'error', a.error, 'superseded', a.superseded) ORDER BY a.attempt)
                        FROM webhook_attempts a WHERE a.delivery_id = d.id), '[]') AS attempts
       FROM webhook_deliveries d ${where.length ? `WHERE ${where.join(' AND ')}` : ''}
       ORDER BY d.seq DESC LIMIT $${params.length}`,
      params,
    );
    const page = rows.rows.slice(0, limit);
    const hasMore = rows.rows.length > limit;
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
  @Post(':id/resend')
  @HttpCode(202)
  async resend(@Param('id') id: string) {
    const resent = isUuid(id) ? await resendDelivery(this.pool, id.toLowerCase(), this.clock.now()) : null;
    if (!resent) throw ApiError.notFound('not_found', 'Доставка не найдена');
    return { id: resent.id, status: 'pending', nextAttemptAt: resent.nextAttemptAt.toISOString() };
  }
}
