/**
 * A request body read as the API reads it, without a server: its text parsed, its raw
 * bytes kept for the money rules (as the body hook of create-api.ts keeps them), then
 * the DTO's ValidationPipe. The answer is the 400's body, or null when the body is valid.
 */
import type { Type } from '@nestjs/common';
import { ApiError, ErrorBody } from '../../apps/api/src/http/errors/api-error';
import { RAW_BODIES } from '../../apps/api/src/http/number-literals';
import { readBody } from '../../apps/api/src/http/request-pipe';

export async function refusalOf(cls: Type<object>, text: string): Promise<ErrorBody | null> {
  const body = JSON.parse(text) as unknown;
  if (typeof body === 'object' && body !== null) RAW_BODIES.set(body, Buffer.from(text));
  try {
    await readBody(cls, body);
    return null;
  } catch (error) {
    if (error instanceof ApiError) return error.body();
    throw error;
  }
}
