/**
 * Text and JSON the database can store, and the shape of an id. Requests are read by
 * DTO classes (request-validation.ts, request-fields.ts).
 */

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export const isUuid = (v: unknown): v is string => typeof v === 'string' && UUID.test(v);

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Text PostgreSQL can store as json: no NUL character, no lone UTF-16 surrogate. */
export const storableText = (text: string): boolean => !text.includes('\u0000') && !LONE_SURROGATE.test(text);

export const MAX_JSON_DEPTH = 32;

/**
 * Why an arbitrary JSON value (customFields) cannot be stored, or null: nesting deeper
 * than MAX_JSON_DEPTH, or a key or string with text PostgreSQL refuses. Checked by a
 * bounded walk before anything serialises it.
 */
export function unstorableJson(value: unknown, depth = 0): string | null {
  if (depth > MAX_JSON_DEPTH) return `вложенность глубже ${MAX_JSON_DEPTH} уровней`;
  if (typeof value === 'string') return storableText(value) ? null : 'символ NUL (\\u0000) или одиночный суррогат UTF-16';
  if (Array.isArray(value)) {
    for (const item of value) {
      const problem = unstorableJson(item, depth + 1);
      if (problem) return problem;
    }
    return null;
  }
  if (typeof value === 'object' && value !== null) {
    for (const [key, item] of Object.entries(value)) {
      if (!storableText(key)) return 'символ NUL (\\u0000) или одиночный суррогат UTF-16 в имени поля';
      const problem = unstorableJson(item, depth + 1);
      if (problem) return problem;
    }
  }
  return null;
}
