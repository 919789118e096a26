import { Body, Controller, Get, Inject, Param, Post, Query, Res, UseGuards, UseInterceptors } from '@nestjs/common';
import { CommandBus, QueryBus } from '@nestjs/cqrs';
import type { FastifyReply } from 'fastify';
import type { Clock } from '#platform/clock';
import { invoiceCreatedView, invoiceView } from '#payments';
import { CreateInvoice } from '#payments/invoices';
import { GetInvoice } from '#payments/invoices';
import { ListInvoices } from '#payments/invoices';
import type { MerchantIdentity } from '#payments/merchants';
import { isUuid } from '#domain';
import { ApiError } from '../http/errors/api-error';
import { encodeCursor } from '../http/cursor';
import { cursorSeqOf, pageSizeOf } from '../http/cursor';
import { ListInvoicesQuery } from './list-invoices.request';
import { ACCESS_CONTROL, CLOCK_TOKEN, PUBLIC_URL } from '../http/tokens';
import type { AccessControl } from '#payments/access';
import type { PublicUrl } from '../http/tokens';
import { IdempotencyInterceptor } from '../http/idempotency';
import { CreateInvoiceRequest, toInvoiceRequest } from './create-invoice.request';
import { validRequest } from '../http/request-pipe';
import { Merchant, MerchantAuthGuard, PollMark, PollMarked, PollMarkTaken, rateLimited } from '../http/auth/merchant-auth.guard';
import { ReadsModels } from '../http/read-models';

/** The poll mark of one invoice: one resource however its id is spelled (UUIDs are case-insensitive); none for what is not an invoice id. */
const invoicePollResource = (params: { id?: string }): string | null => (isUuid(params.id) ? `invoice:${params.id.toLowerCase()}` : null);

@Controller('v1/invoices')
@UseGuards(MerchantAuthGuard)
export class InvoicesController {
  constructor(
    private readonly commands: CommandBus,
    private readonly queries: QueryBus,
    @Inject(CLOCK_TOKEN) private readonly clock: Clock,
    @Inject(PUBLIC_URL) private readonly publicUrl: PublicUrl,
    @Inject(ACCESS_CONTROL) private readonly access: AccessControl,
  ) {}

  @Post()
  @UseInterceptors(IdempotencyInterceptor)
  async create(@Merchant() merchant: MerchantIdentity, @Body(validRequest) body: CreateInvoiceRequest, @Res() reply: FastifyReply) {
    const request = toInvoiceRequest(body);
    if (merchant.mode === 'live' && merchant.project.status !== 'active') {
      throw new ApiError(403, 'project_not_active', `Проект не активен (статус ${merchant.project.status}): боевой ключ не может создавать счета`);
    }
    const { created, invoice } = await this.commands.execute(new CreateInvoice(merchant.project, merchant.mode, request, this.clock.now()));
    return reply.status(created ? 201 : 200).send(invoiceCreatedView(invoiceView(invoice, this.publicUrl.value)));
  }

  /** Invoices of the project and mode, newest first (order of arrival), cursor pages. */
  @ReadsModels('invoices')
  @Get()
  async list(@Merchant() merchant: MerchantIdentity, @Query(validRequest) query: ListInvoicesQuery) {
    const { orderId, status } = query;
    const from = query.from === undefined ? undefined : new Date(query.from);
    const to = query.to === undefined ? undefined : new Date(query.to);
    const limit = pageSizeOf(query.limit, 20);
    const before = cursorSeqOf(query.cursor);

    const page = await this.queries.execute(
      new ListInvoices({ projectId: merchant.project.id, mode: merchant.mode, orderId, status, from, to, before, limit }),
    );
    return {
      items: page.items.map((invoice) => invoiceView(invoice, this.publicUrl.value)),
      nextCursor: page.hasMore ? encodeCursor({ seq: page.lastSeq! }) : null,
      hasMore: page.hasMore,
    };
  }

  /** One invoice, from its own stream: what the merchant just wrote is always there. */
  @Get(':id')
  @PollMarked(invoicePollResource)
  async get(@Merchant() merchant: MerchantIdentity, @Param('id') id: string, @PollMark() taken: PollMarkTaken | undefined) {
    const resource = invoicePollResource({ id });
    // Not an invoice id (a NUL, another shape): no invoice, and nothing of it reaches the database.
    if (resource === null) throw ApiError.notFound('invoice_not_found', 'Счёт не найден');
    const refusal = taken ? taken.refusal : await this.access.admitPoll(merchant.keyId, resource, this.clock.now());
    if (refusal) throw rateLimited(refusal.retryAfterSeconds, 'Один счёт можно запрашивать не чаще раза в 3 секунды: ждите вебхук');
    const invoice = await this.queries.execute(new GetInvoice(merchant.project, merchant.mode, id));
    return invoiceView(invoice, this.publicUrl.value);
  }
}
