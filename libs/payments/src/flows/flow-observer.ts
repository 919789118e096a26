import { AppendOutcomeUnknownError } from '#event-store';
import { Refusal } from '#domain';

/**
 * What the refund and payout commands tell the process (metrics, logs). A command
 * whose first step committed answers what that step made, however a later step fails;
 * the failure is told here, and the recovery worker or a process manager finishes the
 * step. Must not throw; must be cheap.
 */
export interface FlowObserver {
  /** A step after the command's first commit failed: the client got the committed result, the rest is left to recovery. */
  leftToRecovery?(flow: 'refund' | 'payout', id: string, error: unknown): void;
}

/** Tells the observer, which never breaks the command. */
export function tellLeftToRecovery(observer: FlowObserver, flow: 'refund' | 'payout', id: string, error: unknown): void {
  try {
    observer.leftToRecovery?.(flow, id, error);
  } catch {
    /* an observer never breaks a command */
  }
}

/**
 * The append recording the ledger's refusal of a refund or payout, for the request still
 * to answer, was sent and its answer lost: the refusal may be recorded (the object never
 * shown) or not (it is still requested, and recovery finishes it). Neither "pending" nor
 * the refusal is then a true answer, so the request answers the marked 503 and a retry
 * under the same Idempotency-Key reads which it was.
 */
export class RefusalOutcomeUnknownError extends AppendOutcomeUnknownError {
  constructor(error: AppendOutcomeUnknownError) {
    super(error.streamName, { cause: error });
    this.name = 'RefusalOutcomeUnknownError';
  }
}

/**
 * A driver that finishes a flow for someone else (a repeat by orderId or key, a GET, an
 * operator's step) got the ledger's decision written, then the next step failed: not
 * "nothing written", since `available` already shows the money reserved (`reserved`), or
 * the invoice already has a refused refund's amount back (`refused`). A marked 503; the
 * same request again continues from there (each step is made once).
 */
export class StepsCutShortError extends Error {
  constructor(
    readonly flow: 'refund' | 'payout',
    readonly id: string,
    readonly done: 'reserved' | 'refused',
    options: { cause: unknown },
  ) {
    super(`${flow} ${id}: ${done} in the ledger, the step after it failed`, options);
    this.name = 'StepsCutShortError';
  }
}

/**
 * A step after the ledger's decision, its failure as it is to be answered. Refused (the
 * ledger moved nothing): for the request still to answer, an unknown outcome of recording
 * the refusal is RefusalOutcomeUnknownError. For anyone finishing, once something visible
 * is written (`done`: the reservation, or a refused refund's amount back on its invoice),
 * a failure that is neither a refusal nor an unknown outcome (marked already) is StepsCutShortError.
 */
export async function afterLedgerDecision<T>(
  decision: { by: 'answering' | 'finishing'; refused: boolean; flow: 'refund' | 'payout'; id: string; done?: 'reserved' | 'refused' },
  step: Promise<T>,
): Promise<T> {
  try {
    return await step;
  } catch (error) {
    const { by, refused, flow, id } = decision;
    const done = decision.done ?? (refused ? null : 'reserved');
    if (refused && by === 'answering' && error instanceof AppendOutcomeUnknownError) throw new RefusalOutcomeUnknownError(error);
    const marked = error instanceof Refusal || error instanceof AppendOutcomeUnknownError;
    throw by === 'finishing' && done !== null && !marked ? new StepsCutShortError(flow, id, done, { cause: error }) : error;
  }
}
