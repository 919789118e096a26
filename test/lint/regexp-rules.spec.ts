/**
 * No regular expression in the gateway's or the SDK's code takes quadratic or worse time
 * on a long text (eslint-plugin-regexp's no-super-linear-move and
 * no-super-linear-backtracking, eslint.config.js): one did (a trim of a pasted console
 * token, five seconds of one process for one request), and `/\/+$/` on a long run of
 * slashes took 2.6 s for 50,000. Each planted file below is linted as if it were at the
 * given path (nothing is written) and must get exactly the rule it breaks; the forms the
 * code uses instead get none. `npm run lint` runs the same configuration over the tree.
 */
import { ESLint } from 'eslint';
import path from 'node:path';

const ROOT = path.resolve(__dirname, '../..');
// eslint-disable-next-line @typescript-eslint/no-require-imports
const config = require(path.join(ROOT, 'eslint.config.js'));
const eslint = new ESLint({ cwd: ROOT, overrideConfigFile: true, overrideConfig: config });

async function rules(file: string, code: string): Promise<(string | null)[]> {
  const [result] = await eslint.lintText(code, { filePath: path.join(ROOT, file) });
  return result!.messages.map((m) => m.ruleId);
}

describe('regular expressions of linear time (eslint-plugin-regexp)', () => {
  it('a trailing run trimmed with an end-anchored quantifier is refused, in the gateway and the SDK', async () => {
    const trim = "export const trim = (s: string) => s.replace(/\\/+$/, '');\n";
    expect(await rules('libs/payments/src/planted.ts', trim)).toEqual(['regexp/no-super-linear-move']);
    expect(await rules('apps/api/src/planted.ts', trim)).toEqual(['regexp/no-super-linear-move']);
    expect(await rules('libs/sdk/src/planted.ts', trim)).toEqual(['regexp/no-super-linear-move']);
  });

  it('two quantifiers that can take the same characters are refused', async () => {
    const twice = 'export const isReset = (s: string) => /^RESET\\s*;?\\s*$/.test(s);\n';
    expect(await rules('libs/platform/src/planted.ts', twice)).toEqual(['regexp/no-super-linear-backtracking']);
  });

  it('the forms the code uses instead pass', async () => {
    const linear = [
      "export const trim = (s: string) => s.replace(/(?<!\\/)\\/+$/, '');",
      'export const isReset = (s: string) => /^RESET\\s*(?:;\\s*)?$/.test(s);',
      "export const zoneless = (s: string) => s.split('%', 1)[0]!;",
      'export const heading = (s: string) => /^#{1,6}\\s+(\\S.*)$/.exec(s);',
    ].join('\n');
    expect(await rules('libs/payments/src/planted.ts', `${linear}\n`)).toEqual([]);
  });

  it('tests are not held to it (they read their own texts)', async () => {
    expect(await rules('test/planted.spec.ts', "export const trim = (s: string) => s.replace(/\\/+$/, '');\n")).toEqual([]);
  });
});
