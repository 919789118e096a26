import type { CommandBus } from '@nestjs/cqrs';
import pino from 'pino';
import type { Pool } from 'pg';
import { ManualClock } from '#platform/clock';
import { WorkerItems } from './worker-items';
import { recoverHalfDoneFlows } from './flow-recovery.worker';
import { completeDueRefunds } from '../refunds/refund-processor.worker';
import { releaseDueHolds } from '../ledger/hold-release.worker';

/**
 * The workers that send a command per item due date each command with the clock as it
 * reads when that command is sent, not once per tick: a tick of a hundred commands would
 * otherwise date the last ones seconds before they are appended, inside a period a
 * finance report may already have answered for (docs/finance-reports.md).
 */
function setUp(rows: Record<string, unknown>[]) {
  let now = Date.parse('2026-04-01T00:00:00Z');
  // Each read of the clock is 10 ms later, as the commands of one tick take their time.
  const clock = new ManualClock(() => (now += 10));
  const sent: { name: string; at: string }[] = [];
  const commands = {
    execute: async (command: { constructor: { name: string }; now?: Date; at?: string }) => {
      sent.push({ name: command.constructor.name, at: command.now?.toISOString() ?? command.at! });
      return {};
    },
  } as unknown as CommandBus;
  const pool = { query: async () => ({ rows }) } as unknown as Pool;
  const items = new WorkerItems('test', clock, pino({ level: 'silent' }));
  return { clock, commands, pool, items, sent };
}

const distinct = (sent: readonly { at: string }[]) => new Set(sent.map((s) => s.at)).size;

it('the refund processor dates each completion when it sends it', async () => {
  const { clock, commands, pool, items, sent } = setUp([{ id: 'rf_1' }, { id: 'rf_2' }, { id: 'rf_3' }]);
  await completeDueRefunds(pool, commands, clock, items)();
  expect(sent.map((s) => s.name)).toEqual(['CompleteRefund', 'CompleteRefund', 'CompleteRefund']);
  expect(distinct(sent)).toBe(3);
});

it('the hold-release worker dates each release when it sends it', async () => {
  const hold = (n: number) => ({ account_id: `a${n}`, mode: 'test', invoice_id: `i${n}` });
  const { clock, commands, pool, items, sent } = setUp([hold(1), hold(2), hold(3)]);
  await releaseDueHolds(pool, commands, clock, items)();
  expect(sent.map((s) => s.name)).toEqual(['ReleaseHold', 'ReleaseHold', 'ReleaseHold']);
  expect(distinct(sent)).toBe(3);
});

it('the flow recovery dates each step when it sends it', async () => {
  // The same rows answer both of its selections: two refunds, then two payouts.
  const { clock, commands, pool, items, sent } = setUp([
    { id: '1', invoice_id: 'i1' },
    { id: '2', invoice_id: 'i2' },
  ]);
  await recoverHalfDoneFlows(pool, commands, clock, items)();
  expect(sent.map((s) => s.name)).toEqual(['AdvanceRefund', 'AdvanceRefund', 'AdvancePayout', 'AdvancePayout']);
  expect(distinct(sent)).toBe(4);
});
