import { Turns } from './turns';

/** The turn a take answered (the test fails when none came). */
const turnOf = async (taken: Promise<(() => void) | string>): Promise<() => void> => {
  const turn = await taken;
  if (typeof turn !== 'function') throw new Error(`no turn: ${turn}`);
  return turn;
};

/** Lets settled takes run their continuations. */
const settle = () => new Promise((resolve) => setImmediate(resolve));

describe('Turns, per key (the heavy reads of a merchant account)', () => {
  it('serves in order of arrival, bounds the waiting, lets a leaving waiter give its place up, and forgets an idle key', async () => {
    const turns = new Turns({ perKey: 2, waitingPerKey: 2, waitMs: 60_000 });
    const first = await turnOf(turns.take('a'));
    const second = await turnOf(turns.take('a'));
    await turnOf(turns.take('b'));
    const served: string[] = [];
    const leaving = new AbortController();
    const waits: string[] = [];
    const third = turns.take('a', undefined, () => waits.push('third')).then((t) => (served.push('third'), t));
    const gone = turns.take('a', leaving.signal, () => waits.push('gone'));
    expect(await turns.take('a')).toBe('full');
    leaving.abort();
    expect(await gone).toBe('gone');
    const fourth = turns.take('a', undefined, () => waits.push('fourth')).then((t) => (served.push('fourth'), t));
    expect(waits).toEqual(['third', 'gone', 'fourth']);
    first();
    first(); // a second call gives nothing back
    const t3 = await turnOf(third);
    expect(served).toEqual(['third']);
    second();
    const t4 = await turnOf(fourth);
    expect(served).toEqual(['third', 'fourth']);
    t3();
    t4();
    expect(turns.keys).toBe(1); // only b's holder is left
  });

  it('a waiter that leaves as its key is given back and taken anew does not forget the new holder (the cap holds)', async () => {
    const turns = new Turns({ size: 2, perKey: 1, waitMs: 60_000 });
    const first = await turnOf(turns.take('K'));
    const leaving = new AbortController();
    const gone = turns.take('K', leaving.signal);
    // In one tick: the waiter leaves, the holder gives back, a new take holds K again.
    leaving.abort();
    first();
    const again = turns.take('K');
    expect(await gone).toBe('gone');
    const held = await turnOf(again);
    expect(turns.keys).toBe(1);
    expect(await Promise.race([turns.take('K', AbortSignal.abort()), settle().then(() => 'waits')])).toBe('gone');
    held();
    expect(turns.keys).toBe(0);
  });

  it('a waiter whose signal was aborted before it waits gets no turn; one with a free turn gets it all the same', async () => {
    const turns = new Turns({ perKey: 1, waitMs: 60_000 });
    const left = new AbortController();
    left.abort();
    const held = await turnOf(turns.take('a', left.signal));
    const waits: string[] = [];
    expect(await turns.take('a', left.signal, () => waits.push('waited'))).toBe('gone');
    expect(waits).toEqual([]);
    held();
    expect(turns.keys).toBe(0);
  });

  it('a wait that runs out gets no turn', async () => {
    jest.useFakeTimers({ doNotFake: ['nextTick', 'setImmediate', 'queueMicrotask'] });
    try {
      const turns = new Turns({ perKey: 1, waitingPerKey: 1, waitMs: 30_000 });
      const held = await turnOf(turns.take('a'));
      const waiting = turns.take('a');
      jest.advanceTimersByTime(29_999);
      await settle();
      held();
      const next = await turnOf(waiting);
      const late = turns.take('a');
      jest.advanceTimersByTime(30_000);
      expect(await late).toBe('waited');
      next();
      expect(turns.keys).toBe(0);
    } finally {
      jest.useRealTimers();
    }
  });
});

describe('Turns in all, one per key (the reports of a process)', () => {
  it('a key at its cap waits while a later key takes a free turn; a freed turn goes to the first waiter that may take it', async () => {
    const turns = new Turns({ size: 2, perKey: 1, waiting: 2, waitMs: 60_000 });
    const order: string[] = [];
    const take = (name: string, key?: string) => turns.take(key).then((t) => (order.push(name), t));
    const a1 = await turnOf(take('a1', 'a'));
    expect(turns.wouldWait('a')).toBe(true);
    const a2 = take('a2', 'a');
    expect(turns.full).toBe(false);
    const b1 = await turnOf(take('b1', 'b'));
    expect(turns.full).toBe(true);
    expect(turns.wouldWait()).toBe(true);
    // Every turn taken: one without a key waits too, behind a2; the waiting is full past two.
    const operator = take('operator');
    expect(await turns.take('c')).toBe('full');
    // b's turn freed: a2 may not take it (a holds one), the operator does.
    b1();
    await turnOf(operator);
    expect(order).toEqual(['a1', 'b1', 'operator']);
    a1();
    await turnOf(a2);
    expect(order).toEqual(['a1', 'b1', 'operator', 'a2']);
  });

  it('with every turn taken, waiters of several keys are served in order of arrival', async () => {
    const turns = new Turns({ size: 1, perKey: 1, waitMs: 60_000 });
    let held = await turnOf(turns.take('a'));
    const order: string[] = [];
    const waiters = ['c', 'b', undefined, 'a'].map((key) => turns.take(key).then((t) => (order.push(key ?? 'none'), t)));
    for (const waiter of waiters) {
      held();
      held = await turnOf(waiter);
    }
    held();
    expect(order).toEqual(['c', 'b', 'none', 'a']);
    expect(turns.keys).toBe(0);
  });
});
