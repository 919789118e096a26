/**
 * A report built whole holds its turn until its answer has been sent (docs/audit-log.md,
 * "Signed statements"): a slow reader of a signed statement keeps that document in
 * memory, so the next report waits until the answer is written whole or its connection
 * closes, not merely until it is built. Tested on ReportBuilds itself: a gateway's answer
 * stays unsent only while it exceeds the socket buffers of both ends (megabytes on
 * loopback), far more than a test's statement holds; here a response is an emitter that
 * finishes or closes when the test says.
 */
import { EventEmitter } from 'node:events';
import type { ReadModelRebuilds } from '#event-store/projections';
import { REPORT_BUILDS, REPORT_SEND_SECONDS, ReportBuilds } from '../../apps/api/src/audit/report-builds';

class Response extends EventEmitter {
  writableFinished = false;
  destroyed = false;
  destroy(): void {
    this.destroyed = true;
    this.emit('close');
  }
}

const noRebuilds = { rebuilding: async () => [] } as unknown as ReadModelRebuilds;

describe('a report holds its turn until its answer is sent', () => {
  it('the next report is built only when an earlier answer has finished or its connection closed', async () => {
    const builds = new ReportBuilds(noRebuilds);
    const responses = Array.from({ length: REPORT_BUILDS + 2 }, () => new Response());
    const built: number[] = [];
    const answers = responses.map((response, i) =>
      builds.inTurn({ response }, { report: 'test' }, async () => {
        built.push(i);
        return i;
      }),
    );
    // The first REPORT_BUILDS are built and answered; their answers are not sent yet.
    expect(await Promise.all(answers.slice(0, REPORT_BUILDS))).toEqual([0, 1]);
    await new Promise((resolve) => setImmediate(resolve));
    expect(built).toEqual([0, 1]);
    // One answer written whole: the next report gets the turn.
    responses[0]!.writableFinished = true;
    responses[0]!.emit('finish');
    responses[0]!.emit('close');
    expect(await answers[2]).toBe(2);
    expect(built).toEqual([0, 1, 2]);
    // A connection closed before its answer was sent gives the turn back too (once: 'close' after 'finish' gives nothing more).
    responses[1]!.destroyed = true;
    responses[1]!.emit('close');
    expect(await answers[3]).toBe(3);
    expect(built).toEqual([0, 1, 2, 3]);
  });

  it('a reader that stops reading is cut off after REPORT_SEND_SECONDS, and its turn passes on', async () => {
    jest.useFakeTimers({ doNotFake: ['setImmediate', 'nextTick'] });
    try {
      const builds = new ReportBuilds(noRebuilds);
      const responses = Array.from({ length: REPORT_BUILDS }, () => new Response());
      expect(await Promise.all(responses.map((response, i) => builds.inTurn({ response }, { report: 'test' }, async () => i)))).toEqual([0, 1]);
      // Nobody reads: just before the bound, every turn is held.
      jest.advanceTimersByTime(REPORT_SEND_SECONDS * 1000 - 1);
      expect(responses.map((r) => r.destroyed)).toEqual([false, false]);
      jest.advanceTimersByTime(1);
      expect(responses.map((r) => r.destroyed)).toEqual([true, true]);
      // The turns are free: the next report is built at once.
      expect(await builds.inTurn({ response: new Response() }, { report: 'test' }, async () => 'next')).toBe('next');
    } finally {
      jest.useRealTimers();
    }
  });
});
