/**
 * The lines log:verify prints about off-site checkpoints: one saved on a fresh install
 * (the empty log, position 0/0, 0 events, the genesis hash) is reproduced by every later
 * log, which starts with it; before, it "named no event of the log" and failed for good.
 */
import { GENESIS_HASH, LogCheckpoint } from '#event-store';
import { logReportLines } from './log-report';

const head: LogCheckpoint = { position: '7/3', events: 3n, hash: Buffer.alloc(32, 7) };
const report = { streams: 1, events: 3, checkpointsCompared: 1, head, at: new Map([['7/3', head]]), problems: [], contentDiffers: null };

describe('logReportLines', () => {
  it('reproduces an off-site checkpoint of the empty log (0/0, the genesis hash); another hash there fails', () => {
    const empty = logReportLines(report, [['0/0', GENESIS_HASH.toString('hex')]]);
    expect(empty.failed).toBe(false);
    expect(empty.lines).toContain('off-site checkpoint at position 0/0 (0 events) reproduced');
    const forged = logReportLines(report, [['0/0', Buffer.alloc(32, 1).toString('hex')]]);
    expect(forged.failed).toBe(true);
    // It holds for every log: it is no off-site check of this one, whose limit is still said.
    expect(empty.lines.some((line) => line.startsWith('not checked: a log rewritten or cut'))).toBe(true);
    const real = logReportLines(report, [['7/3', head.hash.toString('hex')]]);
    expect(real.lines.some((line) => line.startsWith('not checked:'))).toBe(false);
  });

  it('a position the log does not reach still fails', () => {
    const missing = logReportLines(report, [['9/9', head.hash.toString('hex')]]);
    expect(missing.failed).toBe(true);
    expect(missing.lines).toContain('FAILED: the off-site checkpoint at position 9/9 names no event of the log');
  });
});
