/**
 * The literal text of every number in a JSON document, by path (`amount`,
 * `methods.card.feePct`, `items[2]`). JSON.parse turns `1e3` and `1000` into the same
 * float; money rules need to know which was written. The document has already been
 * parsed as valid JSON; anything unexpected simply ends the scan.
 */
export function numberLiterals(json: string): Map<string, string> {
  const literals = new Map<string, string>();
  let i = 0;
  const ws = () => {
    while (i < json.length && ' \t\n\r'.includes(json[i]!)) i++;
  };
  const readString = (): string => {
    const start = i;
    i++; // opening quote
    while (i < json.length && json[i] !== '"') i += json[i] === '\\' ? 2 : 1;
    i++; // closing quote
    return JSON.parse(json.slice(start, i)) as string;
  };
  const value = (path: string, depth: number): void => {
    if (depth > 64) throw new Error('too deep');
    ws();
    const c = json[i];
    if (c === '{') {
      i++;
      ws();
      if (json[i] === '}') {
        i++;
        return;
      }
      for (;;) {
        ws();
        const key = readString();
        ws();
        i++; // colon
        value(path ? `${path}.${key}` : key, depth + 1);
        ws();
        if (json[i] === ',') {
          i++;
          continue;
        }
        i++; // closing brace
        return;
      }
    }
    if (c === '[') {
      i++;
      ws();
      if (json[i] === ']') {
        i++;
        return;
      }
      for (let index = 0; ; index++) {
        value(`${path}[${index}]`, depth + 1);
        ws();
        if (json[i] === ',') {
          i++;
          continue;
        }
        i++; // closing bracket
        return;
      }
    }
    if (c === '"') {
      readString();
      return;
    }
    const match = /^-?\d+(\.\d+)?([eE][+-]?\d+)?|^(true|false|null)/.exec(json.slice(i, i + 400));
    if (!match) throw new Error('unexpected token');
    if (match[3] === undefined) literals.set(path, match[0]);
    i += match[0].length;
  };
  try {
    value('', 0);
  } catch {
    // not the JSON we expected: no literals beyond what was read
  }
  return literals;
}
