/**
 * The first name that appears twice in one object of a JSON text, as a request field
 * path (`amount`, `customer.email`, `items[2].code`), or null when every object's names
 * are distinct. Hand-written because JSON.parse silently keeps the last of duplicate
 * names and no parser option reports them, while a proxy that inspects or signs the
 * body may read the first: the API refuses such a body instead of guessing.
 *
 * `text` must already be valid JSON (it is scanned after JSON.parse accepted it).
 * Iterative, so any depth JSON.parse took is scanned without deep recursion.
 */
export function duplicateJsonName(text: string): string | null {
  /** The open containers, innermost last: an object's names so far, or an array's next index. */
  const open: ({ path: string; names: Set<string> } | { path: string; index: number })[] = [];
  let i = 0;
  /** Past a string starting at i (its opening quote); answers its text as written, between the quotes. */
  const readString = (): string => {
    const start = ++i;
    while (text[i] !== '"') i += text[i] === '\\' ? 2 : 1;
    return text.slice(start, i++);
  };
  const pathOf = (parent: string, name: string) => (parent === '' ? name : `${parent}.${name}`);
  /** The path of the value that starts next, in the innermost container (its name already read). */
  let valuePath = '';
  while (i < text.length) {
    const c = text[i]!;
    if (c === '{') {
      open.push({ path: valuePath, names: new Set() });
      i++;
    } else if (c === '[') {
      open.push({ path: valuePath, index: 0 });
      valuePath = `${valuePath}[0]`;
      i++;
    } else if (c === '}' || c === ']') {
      open.pop();
      i++;
    } else if (c === '"') {
      const written = readString();
      const top = open[open.length - 1];
      if (top && 'names' in top && nextNonSpace(text, i) === ':') {
        // Escapes spell one name in several ways ("a" and "\u0061"): compare decoded names.
        const name = written.includes('\\') ? (JSON.parse(`"${written}"`) as string) : written;
        valuePath = pathOf(top.path, name);
        if (top.names.has(name)) return valuePath;
        top.names.add(name);
      }
    } else if (c === ',') {
      const top = open[open.length - 1];
      if (top && 'index' in top) valuePath = `${top.path}[${++top.index}]`;
      i++;
    } else i++;
  }
  return null;
}

function nextNonSpace(text: string, from: number): string | undefined {
  let i = from;
  while (text[i] === ' ' || text[i] === '\n' || text[i] === '\r' || text[i] === '\t') i++;
  return text[i];
}
