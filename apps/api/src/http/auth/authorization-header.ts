import type { FastifyRequest } from 'fastify';

/**
 * The request's Authorization header: its value, or every value when it was sent more
 * than once. Node keeps the first of repeated Authorization headers and drops the rest
 * without a word; a proxy that reads the last would disagree about who is calling, so
 * the guards refuse a repeat (401), as a repeated X-Public-Id or X-Signature is.
 */
export function authorizationOf(request: FastifyRequest): string | string[] | undefined {
  const raw = request.raw.rawHeaders;
  const values: string[] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) {
    if (raw[i]!.toLowerCase() === 'authorization') values.push(raw[i + 1]!);
  }
  return values.length > 1 ? values : request.headers.authorization;
}
