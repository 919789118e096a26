/**
 * The layout's dependency rules (eslint.config.js) fail on a violation: each planted
 * file below is linted as if it were at the given path in the tree (ESLint's lintText
 * with a file path; nothing is written), and must get exactly the rule it breaks. A
 * file that keeps the rules gets no error. `npm run lint` (part of `npm test`) runs the
 * same configuration over the whole tree.
 */
import { ESLint } from 'eslint';
import path from 'node:path';

const ROOT = path.resolve(__dirname, '../..');
// The repository's configuration itself, loaded with require (ESLint's own loader uses a
// dynamic import, which Jest's module sandbox does not offer).
// eslint-disable-next-line @typescript-eslint/no-require-imports
const config = require(path.join(ROOT, 'eslint.config.js'));
const eslint = new ESLint({ cwd: ROOT, overrideConfigFile: true, overrideConfig: config });

async function problems(file: string, code: string): Promise<{ rule: string | null; message: string }[]> {
  const [result] = await eslint.lintText(code, { filePath: path.join(ROOT, file) });
  return result!.messages.map((m) => ({ rule: m.ruleId, message: m.message }));
}

const rulesOf = (found: { rule: string | null }[]) => found.map((p) => p.rule).sort();

describe('the layout rules (eslint-plugin-boundaries, no-restricted-imports)', () => {
  it('a pure library importing a driver or the framework is refused', async () => {
    const found = await problems(
      'libs/domain/src/planted.ts',
      "import { Pool } from 'pg';\nimport { Injectable } from '@nestjs/common';\nexport const planted = [Pool, Injectable];\n",
    );
    expect(rulesOf(found)).toEqual(['no-restricted-imports', 'no-restricted-imports']);
    expect(found[0]!.message).toContain('pure');
  });

  it('the ledger importing the event store is refused', async () => {
    const found = await problems('libs/ledger/src/planted.ts', "import { handleCommand } from '#event-store';\nexport const planted = handleCommand;\n");
    expect(rulesOf(found)).toEqual(['boundaries/dependencies', 'no-restricted-imports']);
    expect(found.find((p) => p.rule === 'boundaries/dependencies')!.message).toContain('ledger must not import event-store');
  });

  it('platform importing the gateway, or a library importing an app, is refused', async () => {
    const platform = await problems(
      'libs/platform/src/clock/planted.ts',
      "import { LedgerBook } from '#payments/ledger';\nexport const planted = LedgerBook;\n",
    );
    expect(platform.map((p) => p.message)).toEqual([expect.stringContaining('platform must not import payments')]);
    const payments = await problems(
      'libs/payments/src/invoices/planted.ts',
      "import { createApi } from '../../../../apps/api/src/create-api';\nexport const planted = createApi;\n",
    );
    expect(payments.map((p) => p.message)).toEqual([expect.stringContaining('payments must not import app')]);
  });

  it("reaching past another library's index is refused, from an app as from a test", async () => {
    const app = await problems(
      'apps/api/src/planted.ts',
      "import { RefundFlow } from '../../../libs/payments/src/refunds/refund-flow';\nexport const planted = RefundFlow;\n",
    );
    expect(app.map((p) => p.message)).toEqual([expect.stringContaining('through its index')]);
    const test = await problems('test/planted.ts', "import { Money } from '../libs/ledger/src/money';\nexport const planted = Money;\n");
    expect(test.map((p) => p.message)).toEqual([expect.stringContaining('through its index')]);
  });

  it('a library imports the test support only from its own tests', async () => {
    const code = "import { seededRandom } from '../../../../test/support/test-seed';\nexport const planted = seededRandom;\n";
    const source = await problems('libs/payments/src/invoices/planted.ts', code);
    expect(source.map((p) => p.message)).toEqual([expect.stringContaining('payments must not import test')]);
    expect(await problems('libs/payments/src/invoices/planted.spec.ts', code)).toEqual([]);
  });

  it('the SDK imports nothing of the gateway, neither through a subpath import nor past a library', async () => {
    const found = await problems(
      'libs/sdk/src/planted.ts',
      "import { webhookSignature } from '#payments/webhooks';\nimport { Pool } from 'pg';\nexport const planted = [webhookSignature, Pool];\n",
    );
    expect(rulesOf(found)).toEqual(['boundaries/dependencies', 'no-restricted-imports', 'no-restricted-imports']);
    expect(found.find((p) => p.rule === 'boundaries/dependencies')!.message).toContain('sdk must not import payments');
    expect(
      await problems(
        'libs/sdk/src/planted.ts',
        "import { createHmac } from 'node:crypto';\nimport { signRequest } from './signing';\nexport const planted = [createHmac, signRequest];\n",
      ),
    ).toEqual([]);
  });

  it('a file that keeps the rules has no problem', async () => {
    const found = await problems(
      'apps/api/src/planted.ts',
      "import { RefundFlow } from '#payments/refunds';\nimport { Kopecks } from '#ledger';\nimport { SystemClock } from '#platform/clock';\nexport const planted: [unknown, Kopecks | null, unknown] = [RefundFlow, null, SystemClock];\n",
    );
    expect(found).toEqual([]);
  });
});
