import { comparePositions, describeProblem, EventLogReport, GENESIS_HASH, LogCheckpoint, positionFromString } from '#event-store';

/** The checkpoint of the log before its first event (a fresh install's): every log starts with it. */
const EMPTY_LOG_AT = '0/0';

/**
 * The lines log:verify (and ledger:verify) print about the hash chains of the event log;
 * `expected`: the off-site checkpoints, each checked (several at one position are each a line): reproduced when
 * the stored chain hashes fold to its hash and every event up to it gives its stored chain hash from its content
 * (then the fold is L(n) of docs/audit-log.md);
 * `failedBefore`: a check printed before them failed (a saved checkpoint's signature), so no line says OK.
 */
export function logReportLines(
  report: EventLogReport,
  expected: Iterable<readonly [position: string, hash: string]> = [],
  failedBefore = false,
): { lines: string[]; failed: boolean } {
  const lines = [
    `event log: ${report.events} events in ${report.streams} streams, ${report.checkpointsCompared} recorded checkpoint(s) compared`,
    `log head: position ${report.head.position}, ${report.head.events} events, running hash ${report.head.hash.toString('hex')}`,
  ];
  let failed = failedBefore || report.problems.length > 0;
  const differs = report.contentDiffers?.position ? report.contentDiffers : null;
  let offSite = 0;
  for (const [position, hash] of expected) {
    // The empty log's checkpoint holds for every log: it proves nothing of this one.
    if (position !== EMPTY_LOG_AT) offSite++;
    const got: LogCheckpoint | undefined = report.at.get(position) ?? (position === EMPTY_LOG_AT ? { position, events: 0n, hash: GENESIS_HASH } : undefined);
    if (!got) {
      failed = true;
      lines.push(`FAILED: the off-site checkpoint at position ${position} names no event of the log`);
    } else if (got.hash.toString('hex') !== hash.toLowerCase()) {
      failed = true;
      lines.push(`FAILED: at position ${position} the log gives running hash ${got.hash.toString('hex')}, the off-site checkpoint says ${hash}`);
    } else if (differs && comparePositions(positionFromString(differs.position!), positionFromString(position)) <= 0) {
      // The hash folds the stored chain hashes; L(n) folds those the events' contents give, which differ from here on.
      failed = true;
      lines.push(
        `FAILED: the off-site checkpoint at position ${position} is not reproduced: the stored chain hashes give its running hash, but the content of ${differs.streamName} revision ${differs.revision} at position ${differs.position} does not give its stored chain hash ([${differs.kind}], below)`,
      );
    } else lines.push(`off-site checkpoint at position ${position} (${got.events} events) reproduced`);
  }
  if (report.problems.length === 0) {
    lines.push(
      failed
        ? 'FAILED: see above; every stream chain recomputes from its events and every stream head matches.'
        : 'OK: every stream chain recomputes from its events, every stream head matches, every recorded checkpoint is reproduced.',
    );
    // The recorded checkpoints are in the same database: rewritten (or emptied) with the log, they hold again.
    if (!failed && offSite === 0) {
      lines.push(
        "not checked: a log rewritten or cut together with the database's own checkpoints is found only against a checkpoint kept off-site (log:verify --checkpoint or --expect)",
      );
    }
  } else {
    lines.push(`FAILED: ${report.problems.length} problem(s); the first in the log:`);
    lines.push(`  ${describeProblem(report.problems[0]!)}`);
    for (const p of report.problems.slice(1, 50)) lines.push(`  ${describeProblem(p)}`);
    if (report.problems.length > 50) lines.push(`  … and ${report.problems.length - 50} more`);
  }
  return { lines, failed };
}
