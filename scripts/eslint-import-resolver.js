// A small import resolver for eslint-plugin-boundaries (eslint-plugin-import's resolver
// interface, version 2): relative TypeScript imports (file.ts or folder/index.ts) and
// the package's subpath imports ("#domain", "#payments/invoices", ...) through their
// "types" condition in package.json, i.e. to the sources. Anything else is a package.
// Kept here instead of eslint-import-resolver-typescript, whose native resolver's
// optional per-platform packages keep package-lock.json out of step with `npm ci`.
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');
const imports = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')).imports ?? {};

function existing(base) {
  for (const candidate of [base, `${base}.ts`, path.join(base, 'index.ts')]) {
    if (fs.existsSync(candidate) && fs.statSync(candidate).isFile()) return candidate;
  }
  return null;
}

function subpath(source) {
  for (const [pattern, target] of Object.entries(imports)) {
    const types = typeof target === 'string' ? target : target.types;
    if (!types) continue;
    if (pattern === source) return path.join(root, types);
    const star = pattern.indexOf('*');
    if (star >= 0 && source.startsWith(pattern.slice(0, star)) && source.endsWith(pattern.slice(star + 1))) {
      const middle = source.slice(star, source.length - (pattern.length - star - 1));
      return path.join(root, types.replace('*', middle));
    }
  }
  return null;
}

module.exports = {
  interfaceVersion: 2,
  resolve(source, file) {
    if (source.startsWith('.')) {
      const found = existing(path.resolve(path.dirname(file), source));
      return found ? { found: true, path: found } : { found: false };
    }
    if (source.startsWith('#')) {
      const target = subpath(source);
      return target && fs.existsSync(target) ? { found: true, path: target } : { found: false };
    }
    return { found: true, path: null };
  },
};
