import { Controller, Get, Header, Query, Res, UseGuards } from '@nestjs/common';
import { NoParameters, validRequest } from '../http/request-pipe';
import { AdminTokenGuard } from '../http/auth/admin-token.guard';
import { OPERATOR_OPENAPI_DOCUMENT } from './operator-document';
import type { FastifyReply } from 'fastify';
import { OPENAPI_DOCUMENT } from './openapi-document';
import { renderDocsPage } from './docs-page';
import { CONSOLE_ICON } from '../console/console.html';

/** Headers of the docs page: a static page with inline styles only; no scripts, no framing, nothing fetched. */
export const DOCS_PAGE_HEADERS: Readonly<Record<string, string>> = {
  'cache-control': 'no-store',
  'x-frame-options': 'DENY',
  'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'",
  'referrer-policy': 'no-referrer',
  'x-content-type-options': 'nosniff',
};

/**
 * The description of the merchant API: `GET /v1/openapi.json` (OpenAPI 3.1.0) and a
 * readable page at `GET /docs`, rendered from the same object so the two never drift.
 * Neither needs a key: the description is public.
 */
@Controller()
export class OpenApiController {
  private html: string | null = null;

  @Get('v1/openapi.json')
  @Header('cache-control', 'no-store')
  document(@Query(validRequest) _query: NoParameters) {
    return OPENAPI_DOCUMENT;
  }

  /** The gateway's root is its documentation. */
  @Get()
  root(@Res() reply: FastifyReply) {
    return reply.redirect('/docs', 302);
  }

  @Get('favicon.ico')
  icon(@Res() reply: FastifyReply) {
    return reply.status(200).headers(DOCS_PAGE_HEADERS).header('content-type', 'image/svg+xml').send(CONSOLE_ICON);
  }

  @Get('docs')
  docs(@Res() reply: FastifyReply) {
    this.html ??= renderDocsPage(OPENAPI_DOCUMENT);
    return reply.status(200).headers(DOCS_PAGE_HEADERS).header('content-type', 'text/html; charset=utf-8').send(this.html);
  }
}

/** The operator API's description: `GET /admin/v1/openapi.json`, behind the operator token. */
@Controller('admin/v1')
@UseGuards(AdminTokenGuard)
export class OperatorOpenApiController {
  @Get('openapi.json')
  @Header('cache-control', 'no-store')
  document(@Query(validRequest) _query: NoParameters) {
    return OPERATOR_OPENAPI_DOCUMENT;
  }
}
