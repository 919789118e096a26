/**
 * Where the time of a V8 CPU profile (`node --cpu-prof`) went: self time grouped by
 * where the code lives (this repository's libraries and apps, each npm package, Node's
 * own internals, garbage collection, idle), then the heaviest functions.
 *
 *   node dist/bench/cpu-profile-summary.js <file.cpuprofile> [top functions, default 25]
 */
import { readFileSync } from 'node:fs';

interface ProfileNode {
  readonly id: number;
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number };
}
interface CpuProfile {
  readonly nodes: readonly ProfileNode[];
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
}

/** The place a frame's code belongs to. */
export function placeOf(url: string, functionName: string): string {
  if (functionName === '(garbage collector)') return '(garbage collection)';
  if (functionName === '(idle)') return '(idle)';
  if (functionName === '(program)') return '(program: native, not attributed)';
  const modules = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (modules) return modules[1]!;
  const own = /\/dist\/((?:libs|apps)\/[^/]+\/src\/[^/]+)/.exec(url);
  if (own) return own[1]!;
  if (url.startsWith('node:') || url === '') return '(node internals)';
  return url;
}

function main(): void {
  const file = process.argv[2];
  if (!file) throw new Error('usage: cpu-profile-summary <file.cpuprofile> [top]');
  const top = Number(process.argv[3] ?? 25);
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map<number, number>();
  let total = 0;
  profile.samples.forEach((id, i) => {
    const dt = profile.timeDeltas[i] ?? 0;
    self.set(id, (self.get(id) ?? 0) + dt);
    total += dt;
  });
  const byPlace = new Map<string, number>();
  const byFunction = new Map<string, number>();
  for (const [id, us] of self) {
    const frame = byId.get(id)!.callFrame;
    const place = placeOf(frame.url, frame.functionName);
    byPlace.set(place, (byPlace.get(place) ?? 0) + us);
    const fn = `${frame.functionName || '(anonymous)'}  ${place}${frame.url && !frame.url.startsWith('node:') ? `:${frame.lineNumber + 1}` : ''}`;
    byFunction.set(fn, (byFunction.get(fn) ?? 0) + us);
  }
  const busy = total - (byPlace.get('(idle)') ?? 0);
  const line = (name: string, us: number) =>
    `${(us / 1000).toFixed(0).padStart(8)} ms  ${((100 * us) / total).toFixed(1).padStart(5)} % of all  ${((100 * us) / busy).toFixed(1).padStart(5)} % of busy  ${name}`;
  console.log(`${file}: ${(total / 1e6).toFixed(1)} s sampled, ${(busy / 1e6).toFixed(1)} s busy\n\nSelf time by place:`);
  for (const [place, us] of [...byPlace].sort((a, b) => b[1] - a[1])) if (us / total >= 0.002) console.log(line(place, us));
  console.log(`\nHeaviest ${top} functions (self time):`);
  for (const [fn, us] of [...byFunction].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(line(fn, us));
}

if (require.main === module) main();
