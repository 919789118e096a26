import os from 'node:os';
import type { CheckOptions } from './run';
import { Load, OPERATION_KINDS } from './load';
import { Traffic } from './spec-client';
import type { Findings } from './verify';

export interface Phase {
  readonly name: string;
  readonly seconds: number;
}

/** The promises, each a figure that must be 0 (or an exit code that must be 0). */
export interface Verdict {
  readonly failed: number;
  readonly lost: number;
  readonly doubled: number;
  readonly balancesOff: number;
  readonly rollingServerErrors: number;
  readonly rollingNoAnswer: number;
  readonly ledgerVerifyExit: number | null;
  readonly unsettled: string | null;
  readonly gracefulExits: { readonly projector: number | string; readonly apis: readonly (number | string)[] };
}

/** Every promise held. */
export function verdictHolds(verdict: Verdict): boolean {
  return (
    verdict.failed + verdict.lost + verdict.doubled + verdict.balancesOff === 0 &&
    verdict.rollingServerErrors + verdict.rollingNoAnswer === 0 &&
    verdict.ledgerVerifyExit === 0 &&
    verdict.unsettled === null &&
    verdict.gracefulExits.projector === 0 &&
    verdict.gracefulExits.apis.every((c) => c === 0)
  );
}

export interface ReportInput {
  readonly options: CheckOptions;
  readonly nginxVersion: string;
  readonly database: string;
  readonly phases: readonly Phase[];
  readonly traffic: Traffic;
  readonly load: Load;
  readonly findings: Findings;
  readonly verdict: Verdict;
  readonly ledgerVerifyOutput: string;
  readonly seconds: number;
}

function table(header: readonly string[], rows: readonly (readonly (string | number)[])[]): string {
  const cells = [header, ...rows].map((row) => row.map(String));
  const widths = header.map((_, i) => Math.max(...cells.map((row) => row[i]!.length)));
  const line = (row: readonly string[]) => row.map((cell, i) => (i === 0 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!))).join('  ');
  return cells.map(line).join('\n');
}

export function formatReport(input: ReportInput): string {
  const { options, traffic, load, findings, verdict } = input;
  const [load1, load5] = os.loadavg();
  const out: string[] = [];
  out.push(
    `deploy:check: nginx ${input.nginxVersion} with deploy/nginx.conf, 2 API processes, 1 projector, ${input.database}; ` +
      `${options.merchants} merchants x ${options.cyclesPerSecond} cycles/s (7 requests each); ` +
      `${os.cpus().length} cores, load average ${load1!.toFixed(2)} / ${load5!.toFixed(2)} (1 / 5 min)`,
    '',
  );
  out.push(
    table(
      ['phase', 'seconds', 'requests', 'per second', '5xx', 'no answer'],
      input.phases.map((p) => {
        const { serverErrors, noAnswer } = traffic.failuresIn(p.name);
        const requests = traffic.total(p.name);
        return [p.name, p.seconds.toFixed(1), requests, (requests / Math.max(p.seconds, 0.001)).toFixed(1), serverErrors, noAnswer];
      }),
    ),
    '',
  );
  out.push(
    table(
      ['operation', 'attempted', 'acknowledged', 'failed', 'lost', 'doubled'],
      OPERATION_KINDS.map((kind) => {
        const tally = load.tallies.get(kind)!;
        return [kind, tally.attempted, tally.acknowledged, tally.failures.length, findings.lost.get(kind) ?? 0, findings.doubled.get(kind) ?? 0];
      }),
    ),
    '',
  );
  const causes = [...new Set(['429', '500', '503', 'network error', 'timeout', ...traffic.retries.keys()])];
  out.push(`retries by cause: ${causes.map((cause) => `${cause}: ${traffic.retries.get(cause) ?? 0}`).join(', ')}`);
  out.push(
    `balances (read model, rebuilt from the log, sum of acknowledged operations) that differ: ${verdict.balancesOff} of ${load.merchants.length} accounts`,
  );
  out.push(`ledger:verify: ${verdict.ledgerVerifyExit === 0 ? 'passed' : `FAILED (exit ${verdict.ledgerVerifyExit})`}`);
  out.push(
    `exit on SIGTERM: projector ${verdict.gracefulExits.projector}, APIs ${verdict.gracefulExits.apis.join(', ')}; ` +
      `settled: ${verdict.unsettled === null ? 'yes' : `NO (${verdict.unsettled})`}`,
  );
  const failures = OPERATION_KINDS.flatMap((k) => load.tallies.get(k)!.failures);
  const problems = [...failures.slice(0, 10), ...findings.problems];
  if (problems.length > 0) out.push('', 'problems:', ...problems.map((p) => `  ${p}`));
  if (verdict.ledgerVerifyExit !== 0) out.push('', input.ledgerVerifyOutput.trim());
  const held = verdictHolds(verdict);
  out.push(
    '',
    `${held ? 'PASSED' : 'FAILED'}: ${verdict.failed} failed, ${verdict.lost} lost, ${verdict.doubled} doubled; ` +
      `rolling restart: ${verdict.rollingServerErrors} 5xx, ${verdict.rollingNoAnswer} without answer; ${input.seconds.toFixed(1)} s in all`,
    '',
  );
  return out.join('\n');
}
