import { AppendOutcomeUnknownError } from '#event-store';

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

/** Recording a refusal for the request still to answer: an unknown outcome becomes RefusalOutcomeUnknownError. */
export async function recordingRefusal<T>(by: 'answering' | 'finishing', record: Promise<T>): Promise<T> {
  try {
    return await record;
  } catch (error) {
    throw by === 'answering' && error instanceof AppendOutcomeUnknownError ? new RefusalOutcomeUnknownError(error) : error;
  }
}
