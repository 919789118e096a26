import { csvRecord, wantsCsv } from './csv';

describe('CSV records (RFC 4180)', () => {
  it('quotes a field with a comma, a quote, CR or LF, doubles its quotes, leaves others bare, ends with CRLF', () => {
    expect(csvRecord(['a', 'b,c', 'say "hi"', 'x\ny', 'r\rs', '', null, undefined, 12, '-965.00'])).toBe(
      'a,"b,c","say ""hi""","x\ny","r\rs",,,,12,-965.00\r\n',
    );
    expect(csvRecord(['payment:inv-1'])).toBe('payment:inv-1\r\n');
  });

  it('takes CSV for format=csv, or without format for an Accept naming text/csv', () => {
    expect(wantsCsv('csv', undefined)).toBe(true);
    expect(wantsCsv('json', 'text/csv')).toBe(false);
    expect(wantsCsv(undefined, 'application/json, text/csv;q=0.9')).toBe(true);
    expect(wantsCsv(undefined, 'TEXT/CSV')).toBe(true);
    expect(wantsCsv(undefined, 'text/csvx')).toBe(false);
    expect(wantsCsv(undefined, undefined)).toBe(false);
  });
});
