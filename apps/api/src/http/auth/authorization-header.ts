import type { FastifyRequest } from 'fastify';

/**
 * The request's Authorization header: its value, or every value when it was sent more
 * than once. Node keeps the first of repeated Authorization headers and drops the rest
 * without a word; a proxy that reads the last would disagree about who is calling, so
 * the guards refuse a repeat (401), as a repeated X-Public-Id or X-Signature is
 * (repeatedHeader).
 */
export function authorizationOf(request: FastifyRequest): string | string[] | undefined {
  const raw = request.raw.rawHeaders;
  const values: string[] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) {
    if (raw[i]!.toLowerCase() === 'authorization') values.push(raw[i + 1]!);
  }
  return values.length > 1 ? values : request.headers.authorization;
}

/**
 * The first of `names` (lower case) sent more than once, counted together (`X-Signature`
 * and `Signature` are one header), or null. Node joins repeats of these headers into
 * `a, b`, which would be read as one wrong value: a live key as unknown, a good
 * signature as not matching.
 */
export function repeatedHeader(request: FastifyRequest, names: readonly string[]): string | null {
  const raw = request.raw.rawHeaders;
  let seen = 0;
  for (let i = 0; i + 1 < raw.length; i += 2) if (names.includes(raw[i]!.toLowerCase()) && ++seen > 1) return raw[i]!;
  return null;
}
