import { CanActivate, createParamDecorator, ExecutionContext, Inject, Injectable } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import type { MerchantIdentity, Registry } from '../../../../libs/registry/src';
import { ApiError } from '../errors/api-error';
import { REGISTRY } from '../tokens';

type WithMerchant = FastifyRequest & { merchant?: MerchantIdentity };

/**
 * Mode 1 of the spec: `Authorization: Bearer sk_test_…|sk_live_…`. The key selects
 * the project and the mode; an unknown or revoked key is 401 `unauthorized`. (Keys
 * are looked up by their SHA-256 hash, so no secret is compared in user code.)
 */
@Injectable()
export class MerchantAuthGuard implements CanActivate {
  constructor(@Inject(REGISTRY) private readonly registry: Registry) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const request = context.switchToHttp().getRequest<WithMerchant>();
    const match = /^Bearer\s+(\S+)$/i.exec(request.headers.authorization ?? '');
    if (!match) throw ApiError.unauthorized('Нужен заголовок Authorization: Bearer <секретный ключ проекта>');
    const identity = await this.registry.identifyBySecretKey(match[1]!);
    if (!identity) throw ApiError.unauthorized('Ключ не найден или отозван');
    request.merchant = identity;
    return true;
  }
}

/** The project and mode of the authenticated key. */
export const Merchant = createParamDecorator((_: unknown, context: ExecutionContext): MerchantIdentity => {
  const merchant = context.switchToHttp().getRequest<WithMerchant>().merchant;
  if (!merchant) throw new Error('Merchant() used on a route without MerchantAuthGuard');
  return merchant;
});
