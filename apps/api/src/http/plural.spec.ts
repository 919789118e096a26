import { plural } from './plural';

describe('plural (the Russian noun form after a count)', () => {
  const form = (n: number) => plural(n, 'one', 'few', 'many');

  it.each([1, 21, 31, 101, 1001, 121])('%i → one', (n) => expect(form(n)).toBe('one'));
  it.each([2, 3, 4, 22, 23, 24, 72, 102, 1004])('%i → few', (n) => expect(form(n)).toBe('few'));
  it.each([0, 5, 6, 9, 10, 11, 12, 13, 14, 15, 19, 20, 25, 30, 100, 111, 112, 114, 211, 1000])('%i → many', (n) => expect(form(n)).toBe('many'));

  it('a negative count takes the form of its magnitude', () => {
    expect([form(-1), form(-3), form(-11)]).toEqual(['one', 'few', 'many']);
  });

  it('the console’s nouns', () => {
    expect([1, 2, 5, 21, 72].map((n) => `${n} ${plural(n, 'проводка', 'проводки', 'проводок')}`)).toEqual([
      '1 проводка',
      '2 проводки',
      '5 проводок',
      '21 проводка',
      '72 проводки',
    ]);
    expect([1, 3, 11, 31].map((n) => `${n} ${plural(n, 'день', 'дня', 'дней')}`)).toEqual(['1 день', '3 дня', '11 дней', '31 день']);
  });
});
