/**
 * Every link of every Markdown file of the repository leads somewhere: a relative
 * link names a file that exists, and its #anchor a heading of that file (GitHub's
 * slug: lower case, punctuation dropped, spaces as hyphens, -1, -2… for repeats).
 * Links to other sites are not fetched (no network here).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';

const ROOT = path.resolve(__dirname, '../..');

/** The repository's Markdown files, as git knows them (tracked, or new and not ignored). */
function markdownFiles(): string[] {
  const out = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard', '--', '*.md'], { cwd: ROOT, encoding: 'utf8' });
  return [...new Set(out.split('\n').filter((f) => f !== '' && existsSync(path.join(ROOT, f))))].sort();
}

/** The lines outside fenced code blocks, with their numbers. */
function proseLines(text: string): { line: string; number: number }[] {
  let fenced = false;
  const lines: { line: string; number: number }[] = [];
  text.split('\n').forEach((line, i) => {
    if (/^\s*(```|~~~)/.test(line)) fenced = !fenced;
    else if (!fenced) lines.push({ line, number: i + 1 });
  });
  return lines;
}

const anchorCache = new Map<string, Set<string>>();
/** The anchors GitHub gives the headings of a Markdown file. */
function anchorsOf(file: string): Set<string> {
  let anchors = anchorCache.get(file);
  if (anchors) return anchors;
  anchors = new Set();
  const seen = new Map<string, number>();
  for (const { line } of proseLines(readFileSync(file, 'utf8'))) {
    const heading = /^(#{1,6})\s+(.*?)\s*#*\s*$/.exec(line);
    if (!heading) continue;
    const slug = heading[2]!
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/ /g, '-');
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    anchors.add(n === 0 ? slug : `${slug}-${n}`);
  }
  anchorCache.set(file, anchors);
  return anchors;
}

describe('Markdown links', () => {
  const files = markdownFiles();

  it('finds the repository’s Markdown files', () => {
    expect(files).toEqual(expect.arrayContaining(['README.md', 'docs/operations.md']));
  });

  it('every relative link names an existing file, and every #anchor one of its headings', () => {
    const broken: string[] = [];
    let checked = 0;
    for (const file of files) {
      for (const { line, number } of proseLines(readFileSync(path.join(ROOT, file), 'utf8'))) {
        for (const match of line.replace(/`[^`]*`/g, '').matchAll(/\[[^\]]*\]\(([^)\s]+)\)/g)) {
          const target = match[1]!;
          if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue;
          checked++;
          const [where, anchor] = target.split('#');
          const destination = where === '' ? path.join(ROOT, file) : path.join(ROOT, path.dirname(file), where!);
          if (!existsSync(destination)) broken.push(`${file}:${number}: no file ${target}`);
          else if (anchor !== undefined) {
            if (statSync(destination).isDirectory() || !destination.endsWith('.md')) broken.push(`${file}:${number}: an anchor on a non-Markdown target ${target}`);
            else if (!anchorsOf(destination).has(decodeURIComponent(anchor))) broken.push(`${file}:${number}: no heading #${anchor} in ${where || file}`);
          }
        }
      }
    }
    expect(broken).toEqual([]);
    expect(checked).toBeGreaterThan(100);
  });
});
