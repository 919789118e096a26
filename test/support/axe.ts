import { readFileSync } from 'node:fs';
import type { Page } from 'playwright-core';

/** axe-core's script (a devDependency: `npm install --save-dev axe-core@4.14.1` when it is missing). */
function axeSource(): string {
  try {
    return readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');
  } catch {
    throw new Error('The accessibility test needs the axe-core package (a devDependency); it is not installed. Run: npm install --save-dev axe-core@4.14.1');
  }
}

/**
 * axe-core's violations on the page as it is now, one line each: rule, impact, elements.
 * The pages carry a CSP without scripts: the page's context must bypass it (bypassCSP).
 */
export async function axeViolations(page: Page): Promise<string[]> {
  await page.addScriptTag({ content: axeSource() });
  return page.evaluate(`axe.run(document, { resultTypes: ['violations'] }).then((r) =>
    r.violations.map((v) => v.id + ' (' + v.impact + '): ' + v.nodes.map((n) => n.target.join(' ')).join(', ')))`);
}
