import { parseArgs } from 'node:util';
import { formatMoney } from '#ledger';
import { awaitPostedThrough, reconcilePeriod, REPORTED_READ_MODELS } from '#payments/audit';
import { loadConfigOrExit, openInfrastructure, usageOnHelp } from '#payments/composition';
import { COMMAND_SESSION_LIMITS, outcomeDecided } from '#platform/database';
import { createLogger } from '#platform/logging';
import { calendarInstantProblem } from '#platform/clock';
import { readCheckpoint, ReadModelRebuildingError } from '#event-store/projections';

/**
 * `npm run audit:reconcile -- --from <ISO> --to <ISO>`: paid invoices, succeeded refunds
 * and paid payouts of (from, to] against their ledger entries, and the entries of the
 * period against their flows (the same report as GET /admin/v1/audit/reconciliation).
 * Prints one line per difference with its ids; exits 0 when there is none, 1 when there
 * is any, 2 when it could not run (bad arguments, a `--to` still to come, no database).
 * Reads only: a read-only database role and no secrets key are enough.
 */
async function main(): Promise<number> {
  usageOnHelp('usage: npm run audit:reconcile -- --from <ISO 8601> --to <ISO 8601>   (the period (from, to], e.g. 2026-11-01T00:00:00Z)');
  let values: { from?: string; to?: string };
  try {
    const parsed = parseArgs({ options: { from: { type: 'string' }, to: { type: 'string' } }, strict: true, tokens: true });
    // Given twice, parseArgs keeps the last: refused, as the API refuses a repeated parameter.
    const twice = parsed.tokens.filter((t) => t.kind === 'option').find((t, i, all) => all.findIndex((o) => o.kind === 'option' && o.name === t.name) !== i);
    if (twice?.kind === 'option') return fail(`--${twice.name} is given twice`);
    values = parsed.values;
  } catch (error) {
    return fail((error as Error).message);
  }
  const instant = (name: 'from' | 'to'): Date => {
    const text = values[name];
    if (text === undefined) fail(`--${name} is required (an ISO 8601 instant, e.g. 2026-11-01T00:00:00Z)`);
    const problem = calendarInstantProblem(text);
    if (problem === 'format') fail(`--${name} ${text}: not an ISO 8601 instant of a real calendar date and time`);
    if (problem === 'range') fail(`--${name} ${text}: outside 0000-01-01T00:00:00Z..9999-12-31T23:59:59.999Z in UTC`);
    return new Date(text);
  };
  const from = instant('from');
  const to = instant('to');
  if (from.getTime() > to.getTime()) fail('--to must not be before --from');

  const config = loadConfigOrExit('audit:reconcile');
  const log = createLogger('audit-reconcile', config.logLevel ?? 'warn');
  const infra = await openInfrastructure(config, log, {
    applicationName: 'gateway-audit-reconcile',
    poolSize: 2,
    limits: COMMAND_SESSION_LIMITS,
    access: 'read-only',
  });
  try {
    // As the API's report: a period that has not ended is not reconciled (its flows are still moving).
    const now = infra.clock.now();
    if (to.getTime() > now.getTime()) {
      process.stderr.write(`audit:reconcile: --to ${to.toISOString()} has not come yet (the gateway clock: ${now.toISOString()})\n`);
      // The clock is this process's own (CLOCK); a gateway with CLOCK=manual may be ahead of it.
      const ahead = infra.clock.manual
        ? 0
        : Number((await infra.pool.query<{ offset_ms: string }>('SELECT offset_ms FROM manual_clock')).rows[0]?.offset_ms ?? 0);
      if (ahead > 0 && to.getTime() <= now.getTime() + ahead) {
        process.stderr.write(
          `audit:reconcile: the database's manual clock reads ${new Date(now.getTime() + ahead).toISOString()}: if the gateway runs with CLOCK=manual, run this command with CLOCK=manual too\n`,
        );
      }
      return 2;
    }
    // A read model it reads still marked as being rebuilt (as the API answers 503 for it): waiting would not help when
    // the rebuild was stopped half-way and no projector runs to finish it.
    const rebuilding: string[] = [];
    for (const { name } of Object.values(REPORTED_READ_MODELS)) if ((await readCheckpoint(infra.pool, name))?.rebuildStartedAt) rebuilding.push(name);
    if (rebuilding.length > 0) return beingRebuilt(rebuilding);
    // As the API's report: answered once final (every entry dated up to --to posted and read), so it never changes afterwards.
    if (!(await awaitPostedThrough(infra.pool, infra.store, now, to, Object.values(REPORTED_READ_MODELS)))) {
      process.stderr.write(
        `audit:reconcile: entries dated up to --to ${to.toISOString()} are still being posted (a projector stopped or behind): its figures are not final yet; run it again in a moment\n`,
      );
      return 2;
    }
    let report: Awaited<ReturnType<typeof reconcilePeriod>>;
    try {
      report = await reconcilePeriod(infra.pool, from, to);
    } catch (error) {
      // Marked since the look above (a rebuild began while this waited): its snapshot saw the mark.
      if (error instanceof ReadModelRebuildingError) {
        process.stderr.write(
          `audit:reconcile: a rebuild of the read model(s) ${error.projections.join(', ')} began while this ran, its figures not final: run this again when it has ended\n`,
        );
        return 2;
      }
      throw error;
    }
    const c = report.checked;
    process.stdout.write(
      `reconciliation ${report.from} .. ${report.to}: ${c.paidInvoices} paid invoices, ${c.succeededRefunds} succeeded refunds, ${c.paidPayouts} paid payouts, ${c.entries} entries; ${report.differences.length} difference(s)\n`,
    );
    for (const d of report.differences) {
      const amounts = d.expected && d.actual ? ` expected ${money(d.expected)} actual ${money(d.actual)}` : '';
      process.stdout.write(
        `${d.kind} ${d.flow} ${d.flowId} ledger ${d.mode}/${d.accountId} entry ${d.entryId ?? '-'} cause ${d.cause}${amounts}: ${d.detail}\n`,
      );
    }
    const code = report.differences.length > 0 ? 1 : 0;
    outcomeDecided(code); // the verdict is printed: a Ctrl-C while it closes does not change it
    return code;
  } finally {
    await infra.close();
  }
}

function beingRebuilt(names: readonly string[]): number {
  process.stderr.write(
    `audit:reconcile: the read model(s) ${names.join(', ')} are being rebuilt, their figures not final: when no projections:rebuild ` +
      'runs any more (one was stopped before it ended), run npm run projections:rebuild (or start the gateway: its projectors finish it); then run this again\n',
  );
  return 2;
}

const money = (r: Readonly<Record<string, number>>) =>
  Object.entries(r)
    .map(([k, v]) => `${k}=${formatMoney(v)}`)
    .join(',');

function fail(message: string): never {
  process.stderr.write(`audit:reconcile: ${message}\n`);
  process.exit(2);
}

main().then(
  (code) => process.exit(code),
  (error) => {
    process.stderr.write(`audit:reconcile failed: ${(error as Error).message}\n`);
    process.exit(2);
  },
);
