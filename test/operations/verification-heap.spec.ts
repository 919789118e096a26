/**
 * The verification commands run with the heap flags of decision 0123: the npm scripts
 * give exactly VERIFICATION_NODE_FLAGS (the bench runs the scripts), and this
 * Node accepts them (an unknown flag would stop the command before it starts).
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { VERIFICATION_NODE_FLAGS } from '../../apps/projector/src/verification-heap';

const run = promisify(execFile);
const scripts = (JSON.parse(readFileSync(path.join(__dirname, '../../package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;

describe('the verification commands’ heap flags', () => {
  it.each([
    ['ledger:verify', 'dist/apps/projector/src/ledger-verify.js'],
    ['log:verify', 'dist/apps/projector/src/log-verify.js'],
  ])('%s runs node with them, before its script', (name, script) => {
    expect(scripts[name]).toBe(`node scripts/build-dist.js && exec node ${VERIFICATION_NODE_FLAGS.join(' ')} ${script}`);
  });

  it('are accepted by this Node, which refuses a flag it does not know', async () => {
    await expect(run(process.execPath, [...VERIFICATION_NODE_FLAGS, '-e', '0'])).resolves.toEqual({ stdout: '', stderr: '' });
    await expect(run(process.execPath, ['--heap-growing-percentage=25', '-e', '0'])).rejects.toThrow('bad option');
  });
});
