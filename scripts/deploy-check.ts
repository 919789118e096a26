import { usageOnHelp } from '#payments/composition';
import { CheckOptions, DEFAULT_OPTIONS, runDeployCheck } from './deploy-check/run';

const USAGE = 'usage: npm run deploy:check -- [--merchants N] [--cycles-per-second N] [--warm-up-seconds N] [--keep]';

/**
 * `npm run deploy:check`: runs the documented deployment here (Debian's nginx with
 * deploy/nginx.conf, two API processes, a projector, one PostgreSQL: embedded, or
 * DATABASE_URL), puts it under load through a SIGKILL, a projector restart and a
 * rolling restart, and prints the figures. Exit code 0: every promise held; 1: one
 * did not; 2: it could not run (bad arguments, nginx not installed).
 */
function parseArguments(args: readonly string[]): CheckOptions {
  usageOnHelp(USAGE, args);
  const options: { -readonly [K in keyof CheckOptions]: CheckOptions[K] } = { ...DEFAULT_OPTIONS };
  const number = (name: string, value: string | undefined, min: number, max: number): number => {
    const n = Number(value);
    if (value === undefined || !Number.isFinite(n) || n < min || n > max) fail(`${name} takes a number from ${min} to ${max}, got ${value ?? 'nothing'}`);
    return n;
  };
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (arg === '--merchants') options.merchants = Math.trunc(number(arg, args[++i], 1, 50));
    else if (arg === '--cycles-per-second') options.cyclesPerSecond = number(arg, args[++i], 0.1, 20);
    else if (arg === '--warm-up-seconds') options.warmUpSeconds = number(arg, args[++i], 1, 300);
    else if (arg === '--keep') options.keep = true;
    else fail(`unknown argument ${arg}`);
  }
  return options;
}

function fail(message: string): never {
  process.stderr.write(`deploy:check: ${message}\n${USAGE}\n`);
  process.exit(2);
}

// Interrupted, or its output closed (`| head`): exit, which stops every process it started (processes.ts).
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.once(signal, () => process.exit(2));
for (const stream of [process.stdout, process.stderr]) stream.on('error', () => process.exit(2));

runDeployCheck(parseArguments(process.argv.slice(2))).then(
  (code) => process.exit(code),
  (error) => {
    process.stderr.write(`deploy:check failed: ${(error as Error).stack ?? error}\n`);
    process.exit(1);
  },
);
