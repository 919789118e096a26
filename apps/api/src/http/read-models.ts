import { applyDecorators, CallHandler, ExecutionContext, Inject, Injectable, NestInterceptor, SetMetadata, UseInterceptors } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import type { Observable } from 'rxjs';
import type { ReadModelRebuilds } from '#event-store/projections';
import { ApiError } from './errors/api-error';
import { READ_MODEL_REBUILDS } from './tokens';

const READS_MODELS = 'reads-models';

/** Seconds a client is told to wait while a read model it asked for is rebuilt. */
export const REBUILD_RETRY_AFTER_SECONDS = 5;

/**
 * The read models (projections) a route answers from: while one is rebuilt, the route
 * answers 503 with Retry-After. Only the routes so marked run the interceptor: a route
 * without interceptors skips Nest's interceptor pipeline (rxjs) altogether.
 */
export const ReadsModels = (...projections: string[]) => applyDecorators(SetMetadata(READS_MODELS, projections), UseInterceptors(ReadModelsInterceptor));

/**
 * Runs after the guards (a request is authenticated first): a route marked
 * @ReadsModels answers 503 provider_unavailable with Retry-After while one of its read
 * models is being rebuilt (ReadModelRebuilds), never an empty or partial answer.
 */
@Injectable()
export class ReadModelsInterceptor implements NestInterceptor {
  constructor(
    @Inject(READ_MODEL_REBUILDS) private readonly rebuilds: ReadModelRebuilds,
    private readonly reflector: Reflector,
  ) {}

  async intercept(context: ExecutionContext, next: CallHandler): Promise<Observable<unknown>> {
    const projections = readModelsOf(this.reflector, context);
    if (projections) await refuseWhileRebuilt(this.rebuilds, projections);
    return next.handle();
  }
}

/** The read models the route of `context` is marked to answer from (@ReadsModels), if any. */
export const readModelsOf = (reflector: Reflector, context: ExecutionContext): string[] | undefined =>
  reflector.getAllAndOverride<string[] | undefined>(READS_MODELS, [context.getHandler(), context.getClass()]);

/** Throws the 503 provider_unavailable (Retry-After) of @ReadsModels when one of `projections` is being rebuilt. */
export async function refuseWhileRebuilt(rebuilds: ReadModelRebuilds, projections: readonly string[]): Promise<void> {
  const busy = await rebuilds.rebuilding(projections);
  if (busy.length > 0) throw whileRebuilt(busy);
}

/** The 503 provider_unavailable (Retry-After) of a read model being rebuilt: also of one found marked by a query that read it (ReadModelRebuildingError). */
export const whileRebuilt = (busy: readonly string[]) =>
  new ApiError(
    503,
    'provider_unavailable',
    `Данные (${busy.join(', ')}) пересобираются из журнала событий: повторите запрос через ${REBUILD_RETRY_AFTER_SECONDS} секунд`,
    undefined,
    undefined,
    { 'Retry-After': String(REBUILD_RETRY_AFTER_SECONDS) },
  );

/**
 * The body of an answer streamed from a read model a page at a time (a statement, a CSV
 * export): an error after the headers went out (a rebuild found by a later page) cuts
 * the response off mid-body, which Fastify does without a log line (request logging is
 * off) and before the request is recorded; so it is logged here, at warn.
 */
export async function* loggedWhenCutOff<T>(body: AsyncIterable<T>, log: { warn(fields: object, message: string): void }, fields: object): AsyncGenerator<T> {
  let chunks = 0;
  try {
    for await (const chunk of body) {
      chunks++;
      yield chunk;
    }
  } catch (error) {
    // Chunks produced, not received: the stream reads ahead of the socket. A client gone ends the body without an error: not logged.
    log.warn({ ...fields, chunksProduced: chunks, reason: (error as Error).message }, 'streamed answer cut off mid-body: the client has an incomplete file');
    throw error;
  }
}
