// What the start commands and the tools run before dist/: `tsc -b tsconfig.build.json`
// (an incremental build: nothing compiled when dist/ is up to date) where TypeScript is
// installed, as in a checkout after `npm install`. The production image has no
// TypeScript (`npm prune --omit=dev`): there dist/ is the one the image was built with,
// and the commands run it as it is. Hand-written because `npm run build` needs tsc, and
// running tsc here, in this process, spares each command a second npm.
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');

let tsc;
try {
  tsc = require.resolve('typescript/lib/tsc.js', { paths: [root] });
} catch {
  tsc = null;
}

if (tsc === null) {
  if (!fs.existsSync(path.join(root, 'dist', 'apps'))) {
    process.stderr.write('dist/ is not built and TypeScript is not installed: run `npm install` (or `npm ci`) first, then the command again\n');
    process.exit(2);
  }
} else {
  // tsc reads its arguments from process.argv and exits with its status (0: built or up to date).
  process.argv = [process.argv[0], tsc, '-b', path.join(root, 'tsconfig.build.json')];
  require(tsc);
}
