// What the start commands and the tools run before dist/: `tsc -b tsconfig.build.json`
// (an incremental build: nothing compiled when dist/ is up to date) where TypeScript is
// installed, as in a checkout after `npm install`. The production image has neither
// TypeScript (`npm prune --omit=dev`) nor the sources' tsconfig.build.json: there dist/
// is the one the image was built with, and the commands run it as it is. A checkout
// without TypeScript (`npm install --omit=dev`) is refused: its dist/ may be older than
// its sources. Hand-written because `npm run build` needs tsc, and running tsc here, in
// this process, spares each command a second npm.
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const config = path.join(root, 'tsconfig.build.json');

let tsc;
try {
  tsc = require.resolve('typescript/lib/tsc.js', { paths: [root] });
} catch {
  tsc = null;
}

if (tsc !== null) {
  // tsc reads its arguments from process.argv and exits with its status (0: built or up to date).
  process.argv = [process.argv[0], tsc, '-b', config];
  require(tsc);
} else if (fs.existsSync(config) || !fs.existsSync(path.join(root, 'dist', 'apps'))) {
  process.stderr.write(
    'TypeScript is not installed, so dist/ cannot be built from the sources: run `npm install --include=dev` first (npm leaves dev dependencies out under NODE_ENV=production), then the command again\n',
  );
  process.exit(2);
}
