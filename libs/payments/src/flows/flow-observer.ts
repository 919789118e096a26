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
