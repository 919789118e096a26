/**
 * The Russian form of a noun after a count, by the usual rules on the last two digits:
 * one for 1, 21, 101 (but not 11); few for 2–4, 22–24 (but not 12–14); many for 0,
 * 5–20, 25–30, 11–14. `plural(72, 'проводка', 'проводки', 'проводок')` is «проводки».
 */
export function plural(count: number, one: string, few: string, many: string): string {
  const lastTwo = Math.abs(Math.trunc(count)) % 100;
  const last = lastTwo % 10;
  if (lastTwo >= 11 && lastTwo <= 14) return many;
  if (last === 1) return one;
  if (last >= 2 && last <= 4) return few;
  return many;
}
