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
import { REPORT_BUILDS, REPORT_SEND_SECONDS, REPORT_STALL_SECONDS, ReportBuilds } from '../../apps/api/src/audit/report-builds';

/** A connection whose inactivity timeout the test fires. */
class Connection extends EventEmitter {
  timeoutMs = 0;
  setTimeout(ms: number): void {
    this.timeoutMs = ms;
  }
}

class Response extends EventEmitter {
  writableFinished = false;
  destroyed = false;
  readonly socket = new Connection();
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

  it('an answer that stalls unread for REPORT_STALL_SECONDS is cut off, and its turn passes on; one sent whole clears the bound', async () => {
    const builds = new ReportBuilds(noRebuilds);
    const responses = Array.from({ length: REPORT_BUILDS }, () => new Response());
    expect(await Promise.all(responses.map((response, i) => builds.inTurn({ response }, { report: 'test' }, async () => i)))).toEqual([0, 1]);
    // Each connection times out after that long without a byte sent or read (Node's socket timeout: a slow reader is not cut).
    expect(responses.map((r) => r.socket.timeoutMs)).toEqual([REPORT_STALL_SECONDS * 1000, REPORT_STALL_SECONDS * 1000]);
    responses[0]!.socket.emit('timeout');
    expect(responses.map((r) => r.destroyed)).toEqual([true, false]);
    // Its turn is free: the next report is built at once.
    expect(await builds.inTurn({ response: new Response() }, { report: 'test' }, async () => 'next')).toBe('next');
    // One sent whole: its cut is gone (Node's keep-alive timeout, set on 'finish', is left in place: the timeout is not reset here).
    responses[1]!.socket.setTimeout(73_000);
    responses[1]!.writableFinished = true;
    responses[1]!.emit('finish');
    expect({ timeoutMs: responses[1]!.socket.timeoutMs, listeners: responses[1]!.socket.listenerCount('timeout') }).toEqual({
      timeoutMs: 73_000,
      listeners: 0,
    });
  });
  it(`an answer still being sent after REPORT_SEND_SECONDS is cut off (a reader that takes a byte now and then never stalls), and its turn passes on`, async () => {
    jest.useFakeTimers({ doNotFake: ['nextTick', 'setImmediate', 'queueMicrotask'] });
    try {
      const builds = new ReportBuilds(noRebuilds);
      const responses = Array.from({ length: REPORT_BUILDS }, () => new Response());
      expect(await Promise.all(responses.map((response, i) => builds.inTurn({ response }, { report: 'test' }, async () => i)))).toEqual([0, 1]);
      // Bytes keep going out: the socket's inactivity timeout never fires.
      jest.advanceTimersByTime(REPORT_SEND_SECONDS * 1000 - 1);
      expect(responses.map((r) => r.destroyed)).toEqual([false, false]);
      responses[1]!.writableFinished = true;
      responses[1]!.emit('finish');
      jest.advanceTimersByTime(1);
      // The first is cut off; the second, sent whole in time, is left alone.
      expect(responses.map((r) => r.destroyed)).toEqual([true, false]);
      expect(await builds.inTurn({ response: new Response() }, { report: 'test' }, async () => 'next')).toBe('next');
    } finally {
      jest.useRealTimers();
    }
  });
});

describe('an answer queued behind a pipelined one (it never gets the socket: its response emits nothing, even when destroyed)', () => {
  /** Such a response: no socket, and destroy() emits no 'close'. */
  class Queued extends EventEmitter {
    writableFinished = false;
    destroyed = false;
    readonly socket = null;
    destroy(): void {
      this.destroyed = true;
    }
  }

  it('its turn passes on when its request closes (the client reset), or at the sending bound', async () => {
    jest.useFakeTimers({ doNotFake: ['nextTick', 'setImmediate', 'queueMicrotask'] });
    try {
      const builds = new ReportBuilds(noRebuilds);
      const [reset, forgotten] = [new Queued(), new Queued()];
      const incoming = new EventEmitter();
      expect(await builds.inTurn({ response: reset, incoming, merchant: 'a' }, { report: 'test' }, async () => 'reset')).toBe('reset');
      expect(await builds.inTurn({ response: forgotten, merchant: 'b' }, { report: 'test' }, async () => 'forgotten')).toBe('forgotten');
      const built: string[] = [];
      const next = (name: string, merchant: string) =>
        builds.inTurn({ response: new Response(), merchant }, { report: 'test' }, async () => {
          built.push(name);
          return name;
        });
      const ofA = next('a again', 'a');
      await new Promise((resolve) => setImmediate(resolve));
      expect(built).toEqual([]);
      incoming.emit('close');
      expect(await ofA).toBe('a again');
      // b's waits from a second before the bound (a wait is 30 s at most): the bound gives the turn back.
      jest.advanceTimersByTime(REPORT_SEND_SECONDS * 1000 - 1_000);
      const ofB = next('b again', 'b');
      await new Promise((resolve) => setImmediate(resolve));
      expect(built).toEqual(['a again']);
      jest.advanceTimersByTime(1_000);
      expect(forgotten.destroyed).toBe(true);
      expect(await ofB).toBe('b again');
    } finally {
      jest.useRealTimers();
    }
  });
});

describe('a pipelined client that resets while its report is built', () => {
  it('gives the turn back at once: its request closed unheard during the build, its queued response will emit nothing', async () => {
    const builds = new ReportBuilds(noRebuilds);
    const response = Object.assign(new EventEmitter(), { writableFinished: false, destroyed: false, socket: null, destroy: () => undefined });
    let gone = false;
    expect(
      await builds.inTurn({ response, incoming: new EventEmitter(), merchant: 'a', gone: () => gone }, { report: 'test' }, async () => {
        gone = true; // the reset, while it is built
        return 'built';
      }),
    ).toBe('built');
    // The merchant's next report gets the turn at once (one turn per merchant).
    expect(await builds.inTurn({ response: new Response(), merchant: 'a' }, { report: 'test' }, async () => 'next')).toBe('next');
  });
});

describe('one turn at a time per merchant', () => {
  it("a merchant's second report waits for its first, while another merchant's, arriving later, takes the free turn", async () => {
    const builds = new ReportBuilds(noRebuilds);
    const logged: string[] = [];
    const log = { info: (_: object, message: string) => logged.push(message) };
    const built: string[] = [];
    const report = (name: string, merchant: string | undefined, response: Response) =>
      builds.inTurn({ response, merchant, log }, { report: 'test' }, async () => {
        built.push(name);
        return name;
      });
    const [a1, a2, b1, operator] = [new Response(), new Response(), new Response(), new Response()];
    expect(await report('a1', 'merchant-a', a1)).toBe('a1');
    const second = report('a2', 'merchant-a', a2);
    expect(await report('b1', 'merchant-b', b1)).toBe('b1');
    expect(built).toEqual(['a1', 'b1']);
    expect(logged).toEqual(['report: waiting for its turn (one at a time per merchant)']);
    // Both turns taken: the operator waits too, behind the merchant's second (order of arrival).
    const operators = report('operator', undefined, operator);
    a1.writableFinished = true;
    a1.emit('finish');
    expect(await second).toBe('a2');
    b1.destroy();
    expect(await operators).toBe('operator');
    expect(built).toEqual(['a1', 'b1', 'a2', 'operator']);
    expect(logged[1]).toBe(`report: waiting for its turn (${REPORT_BUILDS} are built at a time)`);
  });
});
