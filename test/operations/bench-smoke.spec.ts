/**
 * `npm run bench` as docs/benchmarks.md prints it, in its smallest form: `--quick` and one
 * section chosen with `--only` (the doc's two flags), on the embedded server the bench
 * starts for itself. It must finish and print its tables and the Summary; no figure is
 * checked (benchmarks print figures, tests never assert a timing: decision 0074).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { ROOT } from '../support/gateway-process';
import { runPrinted } from '../support/runbooks';

it('npm run bench -- --quick --only event-store finishes and prints its tables and the Summary', async () => {
  const printed = /^```sh\n([\s\S]*?)^```/m.exec(readFileSync(path.join(ROOT, 'docs/benchmarks.md'), 'utf8'))![1]!;
  expect(printed).toContain('npm run bench -- --quick ');
  expect(printed).toContain('npm run bench -- --only ');
  const run = await runPrinted('npm run bench -- --quick --only event-store', {}, 180_000);
  if (run.code !== 0) throw new Error(`the bench exited ${run.code}:\n${run.output}`);
  expect(run.output).toContain('Event store (PostgreSQL) reading the whole log from the start');
  expect(run.output).toMatch(/^Summary\nmeasure +figure/m);
  expect(run.output).toMatch(/^event store appends: 32 writer\(s\), 1 event\(s\) per append +\d+ events\/s/m);
}, 240_000);
