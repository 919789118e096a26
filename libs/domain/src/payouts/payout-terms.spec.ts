/**
 * Payout terms: the fee (half-up to the kopeck: kopecks × rate / 1 000 000, where the
 * rate is in 1/10000ths of a percent), the canonical spelling of payout details, their
 * masks, and the USDT amount (six decimals, rounded down).
 */
import {
  canonicalPayoutAccount,
  DEFAULT_PAYOUT_TERMS,
  isUsdtMethod,
  maskPayoutAccount,
  PAYOUT_METHODS,
  payoutAmounts,
  PayoutMethod,
  usdtFor,
} from './payout-terms';

const PHONE = '+79161234567';
const TRC20 = 'TQn9Y2khEsLJW1ChVWFMSMeRDow5KcbLSE';
const TRC20_USDT = 'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t';
const BEP20 = '0x52908400098527886E0F7030069857D2E4169EE7';
const BEP20_CHECKSUMMED = '0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed';

describe('payout terms: defaults', () => {
  it('SBP 1.00 %, USDT TRC-20 2.00 %, USDT BEP-20 1.50 %; a minimum of 100.00 each', () => {
    expect(DEFAULT_PAYOUT_TERMS).toEqual({
      sbp: { feePct: 10_000, min: 10_000 },
      usdt_trc20: { feePct: 20_000, min: 10_000 },
      usdt_bep20: { feePct: 15_000, min: 10_000 },
    });
    expect(PAYOUT_METHODS).toEqual(['sbp', 'usdt_trc20', 'usdt_bep20']);
  });

  it('isUsdtMethod', () => {
    expect(isUsdtMethod('sbp')).toBe(false);
    expect(isUsdtMethod('usdt_trc20')).toBe(true);
    expect(isUsdtMethod('usdt_bep20')).toBe(true);
  });
});

describe('payout terms: payoutAmounts', () => {
  const { sbp, usdt_trc20: trc20, usdt_bep20: bep20 } = DEFAULT_PAYOUT_TERMS;

  it.each([
    // [label, amount, terms, fee]
    ['1000.00 by SBP at 1.00 %', 100_000, sbp, 1_000],
    ['1000.00 by TRC-20 at 2.00 %', 100_000, trc20, 2_000],
    ['1000.00 by BEP-20 at 1.50 %', 100_000, bep20, 1_500],
    ['the minimum 100.00 by SBP', 10_000, sbp, 100],
    ['the minimum 100.00 by BEP-20', 10_000, bep20, 150],
    // Exact halves go up, anything below stays down.
    ['100.50 at 1.00 % (1.005 → 1.01)', 10_050, sbp, 101],
    ['100.49 at 1.00 % (1.0049 → 1.00)', 10_049, sbp, 100],
    ['100.25 at 2.00 % (2.005 → 2.01)', 10_025, trc20, 201],
    ['100.24 at 2.00 % (2.0048 → 2.00)', 10_024, trc20, 200],
    ['101.00 at 1.50 % (1.515 → 1.52)', 10_100, bep20, 152],
    ['100.99 at 1.50 % (1.51485 → 1.51)', 10_099, bep20, 151],
    ['0.50 at 1.00 % (0.005 → 0.01)', 50, sbp, 1],
    ['0.49 at 1.00 % (0.0049 → 0.00)', 49, sbp, 0],
    ['zero', 0, sbp, 0],
    ['1 000 000 000.00 at 2.00 %', 100_000_000_000, trc20, 2_000_000_000],
  ])('%s', (_label, amount, terms, fee) => {
    expect(payoutAmounts(amount, terms)).toEqual({ amount, feeAmount: fee, netAmount: amount - fee });
  });

  it('a rate of 0 %: no fee', () => {
    expect(payoutAmounts(12_345, { feePct: 0, min: 0 })).toEqual({ amount: 12_345, feeAmount: 0, netAmount: 12_345 });
  });

  it('the fee never exceeds the amount (100 % and a misconfigured 150 %)', () => {
    expect(payoutAmounts(12_345, { feePct: 1_000_000, min: 0 })).toEqual({ amount: 12_345, feeAmount: 12_345, netAmount: 0 });
    expect(payoutAmounts(12_345, { feePct: 1_500_000, min: 0 })).toEqual({ amount: 12_345, feeAmount: 12_345, netAmount: 0 });
  });

  it('amount = fee + net, in whole kopecks, for many amounts', () => {
    for (let amount = 0; amount <= 30_000; amount += 7) {
      for (const terms of [sbp, trc20, bep20]) {
        const { feeAmount, netAmount } = payoutAmounts(amount, terms);
        expect(Number.isSafeInteger(feeAmount) && Number.isSafeInteger(netAmount)).toBe(true);
        expect(feeAmount + netAmount).toBe(amount);
        // Half-up: 2 × (exact fee − rounded fee) is in (−1, 1].
        const twiceError = (2 * amount * terms.feePct) / 1_000_000 - 2 * feeAmount;
        expect(twiceError).toBeGreaterThanOrEqual(-1);
        expect(twiceError).toBeLessThan(1);
      }
    }
  });

  it('a negative or fractional amount throws (never a money path)', () => {
    expect(() => payoutAmounts(-1, sbp)).toThrow(RangeError);
    expect(() => payoutAmounts(100.5, sbp)).toThrow(RangeError);
  });
});

describe('payout terms: canonicalPayoutAccount', () => {
  describe('sbp: a Russian mobile number, canonical +79 and nine digits', () => {
    it.each([
      '+7 (916) 123-45-67',
      '89161234567',
      '79161234567',
      '+79161234567',
      '8 (916) 123-45-67',
      '8-916-123-45-67',
      '+7 916 123 45 67',
      '  +79161234567  ',
      '+7\t916\t1234567',
    ])('%j → +79161234567', (input) => {
      expect(canonicalPayoutAccount('sbp', input)).toBe(PHONE);
    });

    it.each([
      ['ten digits without a country code', '9161234567'],
      ['a Moscow landline', '+74951234567'],
      ['a landline written with 8', '8 (812) 123-45-67'],
      ['a Kazakh mobile number', '+77011234567'],
      ['too short', '+7916123456'],
      ['too long', '+791612345678'],
      ['8 and too long', '891612345678'],
      ['+8 instead of +7 or 8', '+89161234567'],
      ['another country', '+19161234567'],
      ['+380', '+380501234567'],
      ['a letter', '+7916123456a'],
      ['dots', '+7.916.123.45.67'],
      ['a slash', '+7916/1234567'],
      ['two pluses', '++79161234567'],
      ['a plus in the middle', '7+9161234567'],
      ['a tel: prefix', 'tel:+79161234567'],
      ['Arabic-Indic digits', '+٧٩١٦١٢٣٤٥٦٧'],
      ['full-width digits', '+７９１６１２３４５６７'],
      ['empty', ''],
      ['spaces only', '   '],
    ])('%s: null', (_label, input) => {
      expect(canonicalPayoutAccount('sbp', input)).toBeNull();
    });
  });

  describe('usdt_trc20: T and 33 base58 characters with a valid checksum, kept as written', () => {
    it.each([TRC20, TRC20_USDT])('%s is valid', (address) => {
      expect(canonicalPayoutAccount('usdt_trc20', address)).toBe(address);
    });

    it('surrounding spaces are trimmed', () => {
      expect(canonicalPayoutAccount('usdt_trc20', `  ${TRC20}\n`)).toBe(TRC20);
    });

    it.each([
      ['33 characters', TRC20.slice(0, -1)],
      ['35 characters', `${TRC20}z`],
      ['a lower-case t', `t${TRC20.slice(1)}`],
      ['another first letter', `A${TRC20.slice(1)}`],
      ['a zero (not base58)', `${TRC20.slice(0, -1)}0`],
      ['a capital O (not base58)', `${TRC20.slice(0, -1)}O`],
      ['a capital I (not base58)', `${TRC20.slice(0, -1)}I`],
      ['a lower-case l (not base58)', `${TRC20.slice(0, -1)}l`],
      ['a space inside', `${TRC20.slice(0, 10)} ${TRC20.slice(11)}`],
      ['a BEP-20 address', BEP20],
      ['a phone', PHONE],
      ['empty', ''],
    ])('%s: null', (_label, input) => {
      expect(canonicalPayoutAccount('usdt_trc20', input)).toBeNull();
    });

    it('a mistyped address fails its checksum: one character changed, its case changed, two swapped', () => {
      const typos = [
        `${TRC20.slice(0, -1)}F`, // …LSE → …LSF
        `${TRC20_USDT.slice(0, 5)}Q${TRC20_USDT.slice(6)}`, // …NHq… → …NHQ…
        `${TRC20.slice(0, 3)}${TRC20[4]}${TRC20[3]}${TRC20.slice(5)}`, // …9Y2… → …92Y…
      ];
      expect(canonicalPayoutAccount('usdt_trc20', TRC20_USDT.toLowerCase())).toBeNull();
      for (const typo of typos) {
        expect(typo).toMatch(/^T[1-9A-HJ-NP-Za-km-z]{33}$/);
        expect(canonicalPayoutAccount('usdt_trc20', typo)).toBeNull();
      }
    });
  });

  describe('usdt_bep20: 0x and 40 hex digits (a mixed case its EIP-55 checksum), in lower case', () => {
    it('kept in lower case, whether written in one case or in mixed case with its EIP-55 checksum', () => {
      expect(canonicalPayoutAccount('usdt_bep20', BEP20)).toBe(BEP20.toLowerCase());
      expect(canonicalPayoutAccount('usdt_bep20', BEP20.toLowerCase())).toBe(BEP20.toLowerCase());
      expect(canonicalPayoutAccount('usdt_bep20', `0x${BEP20.slice(2).toUpperCase()}`)).toBe(BEP20.toLowerCase());
      expect(canonicalPayoutAccount('usdt_bep20', BEP20_CHECKSUMMED)).toBe(BEP20_CHECKSUMMED.toLowerCase());
    });

    it('mixed case against its checksum is a typo: null', () => {
      expect(canonicalPayoutAccount('usdt_bep20', `${BEP20.slice(0, -2)}e7`)).toBeNull(); // …EE7 → …Ee7
      expect(canonicalPayoutAccount('usdt_bep20', `${BEP20_CHECKSUMMED.slice(0, -1)}c`)).toBeNull();
    });

    it('surrounding spaces are trimmed', () => {
      expect(canonicalPayoutAccount('usdt_bep20', ` ${BEP20} `)).toBe(BEP20.toLowerCase());
    });

    it.each([
      ['39 hex digits', BEP20.slice(0, -1)],
      ['41 hex digits', `${BEP20}0`],
      ['no 0x', BEP20.slice(2)],
      ['no 0x, 42 hex digits', `00${BEP20.slice(2)}`],
      ['a non-hex letter', `${BEP20.slice(0, -1)}g`],
      ['a TRC-20 address', TRC20],
      ['empty', ''],
      ['0x only', '0x'],
    ])('%s: null', (_label, input) => {
      expect(canonicalPayoutAccount('usdt_bep20', input)).toBeNull();
    });
  });

  it('canonical spellings are fixed points', () => {
    const cases: [PayoutMethod, string][] = [
      ['sbp', '+7 (916) 123-45-67'],
      ['usdt_trc20', TRC20],
      ['usdt_bep20', BEP20],
    ];
    for (const [method, input] of cases) {
      const canonical = canonicalPayoutAccount(method, input)!;
      expect(canonicalPayoutAccount(method, canonical)).toBe(canonical);
    }
  });
});

describe('payout terms: maskPayoutAccount', () => {
  it('a phone keeps its first five characters and last two', () => {
    expect(maskPayoutAccount('sbp', PHONE)).toBe('+7916*****67');
  });

  it('a wallet keeps its first six characters and last four', () => {
    expect(maskPayoutAccount('usdt_trc20', TRC20)).toBe('TQn9Y2****bLSE');
    expect(maskPayoutAccount('usdt_bep20', BEP20.toLowerCase())).toBe('0x5290****9ee7');
  });

  it('a mask never shows the hidden middle', () => {
    expect(maskPayoutAccount('sbp', PHONE)).not.toContain('12345');
    expect(maskPayoutAccount('usdt_trc20', TRC20)).not.toContain(TRC20.slice(6, -4));
  });
});

describe('payout terms: usdtFor', () => {
  it.each([
    // [netAmount kopecks, rate kopecks per USDT, USDT]
    [9_500, 9_500, '1.000000'],
    [9_405, 9_500, '0.990000'],
    [99_000, 9_500, '10.421052'], // 10.42105263… rounded down
    [980_000, 9_500, '103.157894'], // 103.1578947… rounded down, not up
    [99_000, 9_437, '10.490622'],
    [200, 300, '0.666666'], // 0.6666666…
    [1, 9_500, '0.000105'], // 0.0001052…
    [0, 9_500, '0.000000'],
    [100_000_000_000, 1, '100000000000.000000'], // beyond 2^53 millionths: exact all the same
  ])('%d kopecks at %d kopecks per USDT → %s', (net, rate, usdt) => {
    expect(usdtFor(net, rate)).toBe(usdt);
  });

  it('always six decimals', () => {
    for (const [net, rate] of [
      [1, 1],
      [123_456, 9_500],
      [7, 3],
    ]) {
      expect(usdtFor(net!, rate!)).toMatch(/^\d+\.\d{6}$/);
    }
  });

  it('never more than the rubles buy, and less than a millionth short', () => {
    for (let net = 0; net < 50_000; net += 997) {
      for (const rate of [9_500, 9_437, 10_001, 1]) {
        const [whole, fraction] = usdtFor(net, rate).split('.');
        const micro = BigInt(whole!) * 1_000_000n + BigInt(fraction!);
        expect(micro * BigInt(rate)).toBeLessThanOrEqual(BigInt(net) * 1_000_000n);
        expect((micro + 1n) * BigInt(rate)).toBeGreaterThan(BigInt(net) * 1_000_000n);
      }
    }
  });

  it.each([
    ['zero', 0],
    ['negative', -9_500],
    ['fractional', 95.5],
    ['NaN', Number.NaN],
    ['Infinity', Number.POSITIVE_INFINITY],
  ])('a %s rate throws RangeError', (_label, rate) => {
    expect(() => usdtFor(9_500, rate)).toThrow(RangeError);
  });
});
