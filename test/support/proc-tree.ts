import { readdirSync, readFileSync } from 'node:fs';

/** A /proc file's text, or '' when the process is gone. */
function readFileSyncOr(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return '';
  }
}

/** The processes below `pid` (its children, theirs, …), as /proc tells. */
export function descendantsOf(pid: number): number[] {
  const children = readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .map(Number)
    .filter((p) => Number(/^\d+ \(.*\) \S+ (\d+)/.exec(readFileSyncOr(`/proc/${p}/stat`))?.[1]) === pid);
  return children.flatMap((child) => [child, ...descendantsOf(child)]);
}

/** A process that runs: /proc has it and it is not a zombie (a container's PID 1 may not reap the ones it inherits). */
export const running = (pid: number) => /^\d+ \(.*\) [^Z]/.test(readFileSyncOr(`/proc/${pid}/stat`));
