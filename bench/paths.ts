import { existsSync } from 'node:fs';
import path from 'node:path';

/** The folder holding package.json above this file (bench/ when run from source, dist/bench/ when built). */
export function repoRoot(): string {
  let dir = __dirname;
  while (!existsSync(path.join(dir, 'package.json'))) {
    const parent = path.dirname(dir);
    if (parent === dir) return process.cwd();
    dir = parent;
  }
  return dir;
}
