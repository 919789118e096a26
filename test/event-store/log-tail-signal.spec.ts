/**
 * The wake-up of PostgreSQL subscriptions (LogTailSignal), on fake timers: a
 * subscriber reads the log, finds nothing new, and waits. A wake-up that comes
 * between its read and its wait (a local append, or the shared poll seeing another
 * process's append) must end that wait at once; before the fix it woke nobody and
 * the subscriber slept its whole maximum wait (a second).
 */
import type { Position } from '#event-store';
import { LogTailSignal } from '#event-store/postgres';

const MAX_WAIT_MS = 1000;
const POLL_MS = 20;

/** A wait that records when it ended. */
function watch(wait: Promise<void>): { readonly ended: () => boolean } {
  let ended = false;
  void wait.then(() => (ended = true));
  return { ended: () => ended };
}

describe('LogTailSignal: no lost wake-up between a read and a wait', () => {
  let head: Position | null;
  let signal: LogTailSignal;

  beforeEach(() => {
    jest.useFakeTimers();
    head = null;
    signal = new LogTailSignal(async () => head, POLL_MS);
  });
  afterEach(() => {
    signal.close();
    jest.useRealTimers();
  });

  it('an append committed after the read and before the wait ends the wait at once', async () => {
    const seen = signal.generation; // the subscriber is about to read the log
    signal.notify(); // meanwhile an append of this process commits
    const waiting = watch(signal.wait(MAX_WAIT_MS, seen)); // the read found nothing: wait
    await jest.advanceTimersByTimeAsync(0);
    expect(waiting.ended()).toBe(true);
  });

  it('a poll that saw the log grow while the subscriber was reading ends its wait at once', async () => {
    const other = watch(signal.wait(MAX_WAIT_MS)); // another subscriber waits: the shared poll runs
    const seen = signal.generation; // our subscriber starts its read
    head = { commit: 10n, prepare: 1n }; // another process appends
    await jest.advanceTimersByTimeAsync(POLL_MS); // the poll sees it and wakes the waiters it has
    expect(other.ended()).toBe(true);
    const waiting = watch(signal.wait(MAX_WAIT_MS, seen)); // our read missed it: wait
    await jest.advanceTimersByTimeAsync(POLL_MS); // the next poll sees no growth
    expect(waiting.ended()).toBe(true);
  });

  it('with no wake-up since the read, the wait lasts until a wake-up or its maximum', async () => {
    head = { commit: 10n, prepare: 1n };
    // The shared poll has already seen this head: it does not count as growth again.
    const first = watch(signal.wait(MAX_WAIT_MS));
    await jest.advanceTimersByTimeAsync(POLL_MS);
    expect(first.ended()).toBe(true);

    const seen = signal.generation;
    const quiet = watch(signal.wait(MAX_WAIT_MS, seen));
    await jest.advanceTimersByTimeAsync(MAX_WAIT_MS - 1);
    expect(quiet.ended()).toBe(false);
    await jest.advanceTimersByTimeAsync(1);
    expect(quiet.ended()).toBe(true);

    const woken = watch(signal.wait(MAX_WAIT_MS, signal.generation));
    await jest.advanceTimersByTimeAsync(POLL_MS * 3);
    expect(woken.ended()).toBe(false);
    signal.notify();
    await jest.advanceTimersByTimeAsync(0);
    expect(woken.ended()).toBe(true);
  });

  it('close() ends every wait, and later waits return at once', async () => {
    const waiting = watch(signal.wait(MAX_WAIT_MS, signal.generation));
    signal.close();
    await jest.advanceTimersByTimeAsync(0);
    expect(waiting.ended()).toBe(true);
    const after = watch(signal.wait(MAX_WAIT_MS, signal.generation));
    await jest.advanceTimersByTimeAsync(0);
    expect(after.ended()).toBe(true);
  });
});
