/**
 * LogOrderCheck against recorded checkpoints (docs/audit-log.md, "What verification
 * reports"): how the first difference from a checkpoint's segment is named. An event
 * changed at its recorded place and re-hashed is `chain_hash_mismatch` (named by that
 * event); a recorded event deleted, also the segment's last, stays `event_missing`; one
 * moved within the segment `order_changed`. The same on a real log, through the
 * gateway: test/event-store/event-log-tamper.spec.ts.
 */
import { randomBytes } from 'node:crypto';
import { GENESIS_HASH, LoggedEvent, LogOrderCheck, LogProblem, nextLogHash, RecordedCheckpoint } from '#event-store';

/** Six events of three streams, in log order; two checkpoints recorded over them (events 1-4 and 5-6). */
const LOG: LoggedEvent[] = ['a', 'b', 'a', 'c', 'b', 'a'].map((stream, i, all) => ({
  streamName: `invoice-${stream}`,
  revision: BigInt(all.slice(0, i).filter((s) => s === stream).length),
  position: `${900 + i}/${i + 1}`,
  chainHash: randomBytes(32),
}));

function checkpoints(): RecordedCheckpoint[] {
  let hash = GENESIS_HASH;
  const running = LOG.map((e) => (hash = nextLogHash(hash, e.chainHash!)));
  return [
    [0, 4],
    [4, 6],
  ].map(([from, to], k) => ({
    seq: BigInt(k + 1),
    fromEvents: BigInt(from!),
    events: BigInt(to!),
    position: LOG[to! - 1]!.position,
    hash: running[to! - 1]!,
    eventHashes: Buffer.concat(LOG.slice(from, to).map((e) => e.chainHash!)),
  }));
}

/** The problems of `log` fed in log order against the checkpoints recorded over LOG. */
function problemsOf(log: readonly LoggedEvent[]): LogProblem[] {
  const check = new LogOrderCheck();
  const [first, second] = checkpoints();
  check.checkpoint(first!);
  log.forEach((event, i) => {
    if (i === 4) check.checkpoint(second!);
    check.event(event);
  });
  check.finish();
  return check.problems;
}

const rehashed = (event: LoggedEvent): LoggedEvent => ({ ...event, chainHash: randomBytes(32) });
const named = (e: LoggedEvent) => ({ streamName: e.streamName, revision: e.revision, position: e.position });

/** Three checkpoints of two events each over LOG, with the log's running hash over its events as they are. */
function threeCheckpoints(): RecordedCheckpoint[] {
  let hash = GENESIS_HASH;
  const running = LOG.map((e) => (hash = nextLogHash(hash, e.chainHash!)));
  const recorded: RecordedCheckpoint[] = [0, 2, 4].map((from, k) => ({
    seq: BigInt(k + 1),
    fromEvents: BigInt(from),
    events: BigInt(from + 2),
    position: LOG[from + 1]!.position,
    hash: running[from + 1]!,
    eventHashes: Buffer.concat(LOG.slice(from, from + 2).map((e) => e.chainHash!)),
  }));
  return recorded;
}

/** Three checkpoints of two events each over LOG; the log without events `deleted`, each checkpoint handed in before the first event of its range the log still has. */
function problemsWithout(deleted: readonly number[]): LogProblem[] {
  const recorded = threeCheckpoints();
  const check = new LogOrderCheck();
  let next = 0;
  LOG.forEach((event, i) => {
    if (deleted.includes(i)) return;
    while (next < recorded.length && recorded[next]!.fromEvents <= BigInt(i)) check.checkpoint(recorded[next++]!);
    check.event(event);
  });
  while (next < recorded.length) check.checkpoint(recorded[next++]!);
  check.finish();
  return check.problems;
}
/** A problem's kind and detail, hashes as H. */
const line = (p: LogProblem) => `${p.kind}: ${p.detail.replace(/[0-9a-f]{16}/g, 'H')}`;

describe('LogOrderCheck against recorded checkpoints', () => {
  it('an untouched log matches both', () => {
    expect(problemsOf(LOG)).toEqual([]);
  });

  it('an event changed at its recorded place and re-hashed: chain_hash_mismatch, named by it (inside a segment, at its end, with a later revision re-hashed too)', () => {
    for (const changed of [[1], [3], [0, 2]]) {
      const log = LOG.map((e, i) => (changed.includes(i) ? rehashed(e) : e));
      const found = problemsOf(log);
      expect(found[0]).toMatchObject({ kind: 'chain_hash_mismatch', ...named(LOG[changed[0]!]!) });
      expect(found[0]!.detail).toMatch(
        /^checkpoint 1 recorded chain hash [0-9a-f]{16} as event \d of the log; the event in its place now has chain hash [0-9a-f]{16}: changed/,
      );
      expect(found.map((p) => p.kind)).not.toContain('event_missing');
    }
  });

  it('a recorded event deleted, inside a segment or at its end: event_missing', () => {
    for (const deleted of [1, 3]) {
      const found = problemsOf(LOG.filter((_, i) => i !== deleted));
      expect(found[0]).toMatchObject({
        kind: 'event_missing',
        detail: expect.stringContaining('is not in this range of the log (deleted, or moved out of the range)'),
      });
    }
  });

  it('a deleted event replaced by a re-hashed later one of its range: event_missing', () => {
    const found = problemsOf([LOG[0]!, rehashed(LOG[2]!), LOG[3]!, LOG[4]!, LOG[5]!]);
    expect(found[0]!.kind).toBe('event_missing');
  });

  it('two events of a segment exchanged: order_changed', () => {
    expect(problemsOf([LOG[0]!, LOG[2]!, LOG[1]!, ...LOG.slice(3)])[0]).toMatchObject({ kind: 'order_changed', ...named(LOG[2]!) });
  });

  it('after a checkpoint the log does not reproduce, each later one is judged on its own events: only those holding a change fail', () => {
    // Three checkpoints of two events each; the log's running hash goes on over the events as they are.
    const recorded = threeCheckpoints();
    const problemsAgainstThree = (log: readonly LoggedEvent[]) => {
      const check = new LogOrderCheck();
      log.forEach((event, i) => {
        if (i % 2 === 0) check.checkpoint(recorded[i / 2]!);
        check.event(event);
      });
      check.finish();
      let folded = GENESIS_HASH;
      for (const e of log) folded = nextLogHash(folded, e.chainHash!);
      // The running hash reported (against off-site checkpoints) is still the log's own.
      expect(check.runningHash.equals(folded)).toBe(true);
      return check.problems;
    };
    expect(problemsAgainstThree(LOG)).toEqual([]);
    // Stream a's revision 0 edited and re-hashed: in the first segment only.
    const first = LOG.map((e, i) => (i === 0 ? rehashed(e) : e));
    expect(problemsAgainstThree(first)).toEqual([expect.objectContaining({ kind: 'chain_hash_mismatch', ...named(LOG[0]!) })]);
    // Its revisions 0 and 1 re-hashed (an insider recomputing the stream's chain): the first two segments, not the third.
    const both = LOG.map((e, i) => (i === 0 || i === 2 ? rehashed(e) : e));
    expect(problemsAgainstThree(both)).toEqual([
      expect.objectContaining({ kind: 'chain_hash_mismatch', ...named(LOG[0]!) }),
      expect.objectContaining({ kind: 'chain_hash_mismatch', ...named(LOG[2]!) }),
    ]);
  });

  it('an event deleted inside each of two ranges, the log going on to the last: no tail cut is said', () => {
    const two = problemsWithout([0, 2]);
    expect(two.map(line).join('\n')).not.toContain('gone in all');
    expect(two.map(line)).toEqual([
      expect.stringMatching(/^event_missing: /),
      'chain_hash_mismatch: checkpoint 2 starts after event 2, the log has 1 before it',
      expect.stringMatching(/^event_missing: /),
      'chain_hash_mismatch: checkpoint 3 starts after event 4, the log has 2 before it',
      expect.stringMatching(/^chain_hash_mismatch: the log gives running hash H after 4 events/),
    ]);
    // The log cut in the first range, the later two gone with it: the first line counts them all, no "starts after".
    const cut = problemsWithout([1, 2, 3, 4, 5]);
    expect(cut.map((p) => p.detail).join('\n')).not.toContain('starts after');
    expect(cut[0]!.detail).toMatch(/; 5 recorded event\(s\) are gone in all, events 2 to 6$/);
  });

  it('an event deleted from the first range and the whole second range, the log going on: each checkpoint that "starts after" is named, in log order', () => {
    const whole = problemsWithout([0, 2, 3]);
    expect(whole.map(line).join('\n')).not.toContain('gone in all');
    expect(whole.map(line)).toEqual([
      expect.stringMatching(/^event_missing: /),
      'chain_hash_mismatch: checkpoint 2 starts after event 2, the log has 1 before it',
      expect.stringMatching(/^event_missing: /),
      'chain_hash_mismatch: checkpoint 3 starts after event 4, the log has 1 before it',
      expect.stringMatching(/^chain_hash_mismatch: the log gives running hash H after 3 events/),
    ]);
  });
});
