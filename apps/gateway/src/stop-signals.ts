/**
 * The stop signals of a serving process (SIGINT, SIGTERM, SIGHUP: the terminal of `npm
 * start` closed), caught from its first moment: its entry point installs them before it
 * loads the rest of the gateway (a second or more), so a signal that comes while the
 * process starts is a stop the start-up honours (exit 0), never the end by the signal
 * itself (143). This module imports nothing.
 */
export interface StopSignals {
  /** The first signal that came before a stop was set, or null. */
  readonly requested: string | null;
  /** From now on each signal calls `stop` (at once for one that already came). */
  onStop(stop: (signal: string) => void): void;
}

export function catchStopSignals(): StopSignals {
  let requested: string | null = null;
  let stop: ((signal: string) => void) | null = null;
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, () => (stop ? stop(signal) : (requested ??= signal)));
  return {
    get requested() {
      return requested;
    },
    onStop(handler) {
      stop = handler;
      if (requested !== null) handler(requested);
    },
  };
}
