/**
 * The repository's copies of the two briefs it was built to, docs/design.md (DESIGN.md)
 * and docs/api/payment-gateway-api-v1.md (the merchant API spec), are what their pages
 * say: verbatim, below their two header lines. The originals sit in ../shared beside the
 * clone (as CI runs it); a clone without them cannot compare, and says so.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { BRIEF_COPIES } from '../support/verbatim-copies';

const ROOT = path.resolve(__dirname, '../..');
const SHARED = path.resolve(ROOT, '../shared');

const COPIES = BRIEF_COPIES.map((c) => [c.copy, c.original] as const);

describe('verbatim copies of the briefs', () => {
  if (!existsSync(path.join(SHARED, 'DESIGN.md'))) {
    console.warn(`verbatim copies not compared: ${SHARED} (the briefs) is not beside this clone`);
    it.skip('each copy is its original below its header (../shared is not beside this clone)', () => undefined);
    return;
  }
  it.each(COPIES)('%s is ../shared/%s below its two header lines', (copy, original) => {
    const body = readFileSync(path.join(ROOT, copy), 'utf8').split('\n').slice(2).join('\n');
    expect(body).toBe(readFileSync(path.join(SHARED, original), 'utf8'));
  });
});
