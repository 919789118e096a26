import { Kopecks, PercentRate } from '#ledger';

export const METHOD_CODES = ['sbp', 'card', 'crypto'] as const;
export type MethodCode = (typeof METHOD_CODES)[number];

export interface MethodTerms {
  readonly code: MethodCode;
  readonly title: string;
  /** The merchant's rate for the method. */
  readonly feePct: PercentRate;
  /** Smallest and largest invoice amount. */
  readonly min: Kopecks;
  readonly max: Kopecks;
  readonly enabled: boolean;
}

export type MethodOverride = Partial<Pick<MethodTerms, 'feePct' | 'min' | 'max' | 'enabled'>>;
export type MethodOverrides = Partial<Record<MethodCode, MethodOverride>>;

/**
 * Documented defaults, overridden per project by the operator: SBP 1.50 % (10.00 to
 * 1,000,000.00), card 3.00 % (10.00 to 600,000.00), USDT 2.00 % (500.00 to
 * 5,000,000.00, only for projects with USDT acceptance).
 */
export const DEFAULT_METHODS: Readonly<Record<MethodCode, Omit<MethodTerms, 'code'>>> = {
  sbp: { title: 'СБП (Система быстрых платежей)', feePct: 15_000, min: 1_000, max: 100_000_000, enabled: true },
  card: { title: 'Банковская карта', feePct: 30_000, min: 1_000, max: 60_000_000, enabled: true },
  crypto: { title: 'Криптовалюта (USDT)', feePct: 20_000, min: 50_000, max: 500_000_000, enabled: true },
};

export const isMethodCode = (value: unknown): value is MethodCode => typeof value === 'string' && (METHOD_CODES as readonly string[]).includes(value);

/** The methods of a project: defaults, its overrides, and crypto only with USDT acceptance. */
export function projectMethods(overrides: MethodOverrides, usdtEnabled: boolean): MethodTerms[] {
  return METHOD_CODES.map((code) => {
    const terms = { ...DEFAULT_METHODS[code], ...(overrides[code] ?? {}) };
    return { code, ...terms, enabled: terms.enabled && (code !== 'crypto' || usdtEnabled) };
  });
}
