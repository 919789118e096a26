import { CanActivate, ExecutionContext, Inject, Injectable } from '@nestjs/common';
import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import { ApiError } from '../errors/api-error';
import { ADMIN_TOKEN } from '../tokens';

const digest = (s: string) => createHash('sha256').update(s).digest();

/** The operator API: `Authorization: Bearer <ADMIN_TOKEN>`, compared in constant time. */
@Injectable()
export class AdminTokenGuard implements CanActivate {
  private readonly expected: Buffer;

  constructor(@Inject(ADMIN_TOKEN) adminToken: string) {
    this.expected = digest(adminToken);
  }

  canActivate(context: ExecutionContext): boolean {
    const header = context.switchToHttp().getRequest<FastifyRequest>().headers.authorization ?? '';
    const match = /^Bearer\s+(\S+)$/i.exec(header);
    if (!match || !timingSafeEqual(digest(match[1]!), this.expected)) {
      throw ApiError.unauthorized('Нужен токен оператора: Authorization: Bearer <ADMIN_TOKEN>');
    }
    return true;
  }
}
