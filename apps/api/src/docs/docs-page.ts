import { escapeHtml } from '../pay/payment-page.html';
import { HTTP_METHODS } from './openapi-document';
import { curlLine, OPERATION_EXAMPLES, sdkCall } from './operation-examples';
import type { OperationExample } from './operation-examples';
import type { OpenApiDocument, OperationObject, ParameterObject, PathItemObject, ResponseObject, SchemaObject } from './openapi-document';

/**
 * The readable page of an OpenAPI document (`GET /docs`): pure functions from the
 * document to one self-contained HTML page (inline styles, no scripts), with the small
 * Markdown its descriptions use and each operation's example (operation-examples.ts).
 */

const e = escapeHtml;

/** Inline markdown of the descriptions: `code` and **bold**, everything else escaped. */
function inline(text: string): string {
  return text
    .split(/(`[^`]*`)/)
    .map((part) =>
      part.startsWith('`') && part.endsWith('`') && part.length >= 2
        ? `<code>${e(part.slice(1, -1))}</code>`
        : e(part).replace(/\*\*([^*]+)\*\*/g, '<strong>$1</strong>'),
    )
    .join('');
}

/** The small markdown the descriptions use: `## headings`, `- ` and `1. ` lists, paragraphs. */
export function markdown(text: string, headingLevel = 3): string {
  const out: string[] = [];
  let list: { tag: 'ul' | 'ol'; items: string[] } | null = null;
  let paragraph: string[] = [];
  const flushParagraph = () => {
    if (paragraph.length > 0) out.push(`<p>${inline(paragraph.join(' '))}</p>`);
    paragraph = [];
  };
  const flushList = () => {
    if (list) out.push(`<${list.tag}>${list.items.map((i) => `<li>${inline(i)}</li>`).join('')}</${list.tag}>`);
    list = null;
  };
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    const heading = /^#{1,6}\s+(\S.*)$/.exec(line);
    const bullet = /^[-*]\s+(\S.*)$/.exec(line);
    const numbered = /^\d+\.\s+(\S.*)$/.exec(line);
    if (line === '') {
      flushParagraph();
      flushList();
    } else if (heading) {
      flushParagraph();
      flushList();
      out.push(`<h${headingLevel}>${inline(heading[1]!)}</h${headingLevel}>`);
    } else if (bullet || numbered) {
      flushParagraph();
      const tag = bullet ? 'ul' : 'ol';
      if (list && list.tag !== tag) flushList();
      list ??= { tag, items: [] };
      list.items.push((bullet ?? numbered)![1]!);
    } else if (list) {
      list.items[list.items.length - 1] += ` ${line}`;
    } else {
      paragraph.push(line);
    }
  }
  flushParagraph();
  flushList();
  return out.join('\n');
}

const schemaName = (ref: string) => ref.replace(/^#\/components\/schemas\//, '');
const schemaLink = (name: string) => `<a href="#schema-${e(name)}">${e(name)}</a>`;

const literal = (v: unknown) => `<code>${e(JSON.stringify(v))}</code>`;

/** The type of a schema in one line: links for $ref, unions, arrays, formats. */
export function typeHtml(s: SchemaObject): string {
  if (s.$ref) return schemaLink(schemaName(s.$ref));
  if (s.oneOf) return s.oneOf.map(typeHtml).join(' или ');
  if (s.anyOf) return s.anyOf.map(typeHtml).join(' или ');
  if (s.allOf) return s.allOf.filter((part) => part.$ref || part.type).map(typeHtml).join(' и ');
  const types = s.type === undefined ? [] : Array.isArray(s.type) ? s.type : [s.type as string];
  const named = types
    .filter((t) => t !== 'null')
    .map((t) => {
      if (t === 'array') return `массив ${s.items ? typeHtml(s.items) : ''}`.trim();
      return `<code>${e(t)}</code>`;
    });
  let text = named.join(' или ') || (s.const !== undefined ? '' : 'любой');
  if (s.format) text += ` (${e(s.format)})`;
  if (types.includes('null')) text += ' или <code>null</code>';
  return text;
}

/** Rules of a schema: enum, const, bounds, lengths, pattern, default. */
export function rulesHtml(s: SchemaObject): string {
  const rules: string[] = [];
  if (s.enum) rules.push(`одно из: ${s.enum.map(literal).join(', ')}`);
  if (s.const !== undefined) rules.push(`всегда ${literal(s.const)}`);
  if (s.minimum !== undefined && s.maximum !== undefined) rules.push(`от ${s.minimum} до ${s.maximum}`);
  else if (s.minimum !== undefined) rules.push(`не меньше ${s.minimum}`);
  else if (s.maximum !== undefined) rules.push(`не больше ${s.maximum}`);
  if (s.minLength !== undefined && s.minLength > 0) rules.push(`длина от ${s.minLength}`);
  if (s.maxLength !== undefined) rules.push(`до ${s.maxLength} символов`);
  if (s.pattern) rules.push(`шаблон <code>${e(s.pattern)}</code>`);
  if (s.default !== undefined) rules.push(`по умолчанию ${literal(s.default)}`);
  if (s.unevaluatedProperties === false || (s.additionalProperties === false && s.properties === undefined)) rules.push('других полей нет');
  for (const alt of s.oneOf ?? []) if (!alt.$ref && rulesHtml(alt)) rules.push(rulesHtml(alt));
  return rules.join('; ');
}

const deprecatedBadge = '<span class="badge dep">устарело</span>';

interface FieldRow {
  readonly name: string;
  readonly schema: SchemaObject;
  readonly required: boolean;
}

/** The fields of an object schema, inline nested objects (and arrays of them) flattened as `a.b` / `a[].b`. */
function fieldRows(s: SchemaObject, prefix = ''): FieldRow[] {
  const rows: FieldRow[] = [];
  const required = new Set(s.required ?? []);
  for (const [name, prop] of Object.entries(s.properties ?? {})) {
    const path = `${prefix}${name}`;
    rows.push({ name: path, schema: prop, required: required.has(name) });
    if (!prop.$ref && prop.properties) rows.push(...fieldRows(prop, `${path}.`));
    if (prop.items && !prop.items.$ref && prop.items.properties) rows.push(...fieldRows(prop.items, `${path}[].`));
  }
  return rows;
}

function fieldsTable(s: SchemaObject): string {
  const rows = fieldRows(s);
  if (rows.length === 0) return '';
  const body = rows
    .map(
      (r) => `<tr${r.schema.deprecated ? ' class="deprecated"' : ''}>
  <td><code>${e(r.name)}</code>${r.schema.deprecated ? ` ${deprecatedBadge}` : ''}</td>
  <td>${typeHtml(r.schema)}</td>
  <td>${r.required ? '<span class="badge req">да</span>' : 'нет'}</td>
  <td>${r.schema.description ? inline(r.schema.description) : ''}${rulesHtml(r.schema) ? `<div class="rules">${rulesHtml(r.schema)}</div>` : ''}</td>
</tr>`,
    )
    .join('\n');
  return `<table><thead><tr><th>Поле</th><th>Тип</th><th>Обязательно</th><th>Описание и правила</th></tr></thead><tbody>
${body}
</tbody></table>`;
}

/** Object-level rules a field table does not show. */
function schemaNotes(s: SchemaObject): string {
  const notes: string[] = [];
  // A choice of required fields, at the top or inside allOf (where generators still type the object by its fields).
  for (const anyOf of [s.anyOf, ...(s.allOf ?? []).map((part) => part.anyOf)]) {
    if (anyOf?.every((alt) => alt.required)) {
      notes.push(`Нужно одно из: ${anyOf.map((alt) => alt.required!.map((f) => `<code>${e(f)}</code>`).join(' + ')).join(' или ')}.`);
    }
  }
  for (const [field, needs] of Object.entries(s.dependentRequired ?? {})) {
    notes.push(`С полем <code>${e(field)}</code> обязательно ${needs.map((f) => `<code>${e(f)}</code>`).join(', ')}.`);
  }
  if (s.additionalProperties === false) notes.push('Других полей нет.');
  if (!s.properties && !s.anyOf) {
    const rules = rulesHtml(s);
    notes.push(`Тип: ${typeHtml(s)}${rules ? `; ${rules}` : ''}.`);
  }
  return notes.map((n) => `<p class="note">${n}</p>`).join('\n');
}

function resolve(doc: OpenApiDocument, s: SchemaObject): { name: string | null; schema: SchemaObject } {
  if (!s.$ref) return { name: null, schema: s };
  const name = schemaName(s.$ref);
  return { name, schema: doc.components.schemas[name] ?? {} };
}

function parametersTable(params: readonly ParameterObject[]): string {
  const where: Record<ParameterObject['in'], string> = { query: 'запрос', path: 'путь', header: 'заголовок' };
  const rows = params
    .map(
      (p) => `<tr>
  <td><code>${e(p.name)}</code></td>
  <td>${where[p.in]}</td>
  <td>${typeHtml(p.schema)}</td>
  <td>${p.required ? '<span class="badge req">да</span>' : 'нет'}</td>
  <td>${p.description ? inline(p.description) : ''}${rulesHtml(p.schema) ? `<div class="rules">${rulesHtml(p.schema)}</div>` : ''}</td>
</tr>`,
    )
    .join('\n');
  return `<table><thead><tr><th>Параметр</th><th>Где</th><th>Тип</th><th>Обязателен</th><th>Описание и правила</th></tr></thead><tbody>
${rows}
</tbody></table>`;
}

function responsesTable(responses: Readonly<Record<string, ResponseObject>>): string {
  const rows = Object.entries(responses)
    .map(([status, r]) => {
      const schema = r.content?.['application/json'].schema;
      const headers = Object.entries(r.headers ?? {})
        .map(([name, h]) => `<div class="rules">Заголовок <code>${e(name)}</code>: ${inline(h.description)}</div>`)
        .join('');
      const cls = status.startsWith('2') ? 'ok' : 'err';
      return `<tr>
  <td><span class="status ${cls}">${e(status)}</span></td>
  <td>${markdown(r.description)}${headers}</td>
  <td>${schema ? typeHtml(schema) : '—'}</td>
</tr>`;
    })
    .join('\n');
  return `<table class="responses"><thead><tr><th>Код</th><th>Когда</th><th>Тело</th></tr></thead><tbody>
${rows}
</tbody></table>`;
}

function securityText(doc: OpenApiDocument, op: OperationObject): string {
  const requirements = op.security ?? doc.security;
  if (requirements.length === 0) return 'без авторизации';
  return requirements.map((r) => Object.keys(r).map((k) => `<code>${e(k)}</code>`).join(' + ')).join(' или ');
}

/** The example of an operation: the curl line, the SDK call, the answer (operation-examples.ts). */
export function exampleHtml(method: string, path: string, base: string, example: OperationExample): string {
  return `<div class="example">
<h4>Пример</h4>
<p class="note">Запрос (curl):</p>
<pre tabindex="0" class="curl"><code>${e(curlLine(method, base, path, example))}</code></pre>
<p class="note">То же через SDK (<code>@payment-gateway/sdk</code>):</p>
<pre tabindex="0" class="sdk"><code>${e(sdkCall(example))}</code></pre>
<p class="note">Ответ: <span class="status ${example.response.status < 300 ? 'ok' : 'err'}">${example.response.status}</span></p>
<pre tabindex="0" class="response"><code>${e(JSON.stringify(example.response.body, null, 2))}</code></pre>
</div>`;
}

function operationHtml(
  doc: OpenApiDocument,
  method: string,
  path: string,
  op: OperationObject,
  base: string,
  examples: Readonly<Record<string, OperationExample>>,
): string {
  const parts: string[] = [];
  parts.push(`<section class="operation" id="op-${e(op.operationId)}">
<h3><span class="method ${e(method)}">${e(method.toUpperCase())}</span> <code class="path">${e(base + path)}</code></h3>
<p class="summary">${inline(op.summary)} <span class="opid">operationId: <code>${e(op.operationId)}</code></span></p>`);
  if (op.description) parts.push(markdown(op.description));
  parts.push(`<p class="note">Авторизация: ${securityText(doc, op)}.</p>`);
  if (op.parameters && op.parameters.length > 0) parts.push(`<h4>Параметры</h4>${parametersTable(op.parameters)}`);
  if (op.requestBody) {
    const { name, schema } = resolve(doc, op.requestBody.content['application/json'].schema);
    parts.push(
      `<h4>Тело запроса (${op.requestBody.required ? 'обязательно' : 'необязательно'})${name ? `: ${schemaLink(name)}` : ''}</h4>`,
      fieldsTable(schema),
      schemaNotes(schema),
    );
  }
  parts.push(`<h4>Ответы</h4>${responsesTable(op.responses)}`);
  const example = examples[op.operationId];
  if (example) parts.push(exampleHtml(method, path, base, example));
  parts.push('</section>');
  return parts.join('\n');
}

function operationsOf(items: Readonly<Record<string, PathItemObject>>): { path: string; method: string; op: OperationObject }[] {
  const out: { path: string; method: string; op: OperationObject }[] = [];
  for (const [path, item] of Object.entries(items)) {
    for (const method of HTTP_METHODS) {
      const op = item[method];
      if (op) out.push({ path, method, op });
    }
  }
  return out;
}

function webhookHtml(kind: string, op: OperationObject): string {
  const body = op.requestBody?.content['application/json'].schema;
  const payload = body?.allOf?.find((part) => part.$ref) ?? body;
  return `<section class="operation" id="webhook-${e(kind)}">
<h3><span class="method post">POST</span> <code class="path">webhook_url</code> <span class="event">${e(kind)}</span></h3>
<p class="summary">${inline(op.summary)}. Тело: ${payload ? typeHtml(payload) : '—'}, <code>type</code> = <code>${e(kind)}</code>.</p>
${op.description ? markdown(op.description) : ''}
${op.parameters ? `<h4>Заголовки доставки</h4>${parametersTable(op.parameters)}` : ''}
<h4>Ответ получателя</h4>${responsesTable(op.responses)}
</section>`;
}

const STYLE = `
:root { --fg: #1d232b; --muted: #5b6573; --line: #dde2e8; --bg: #fff; --soft: #f5f7fa; --accent: #0b5cad; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.5 -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; color: var(--fg); background: var(--bg); }
.layout { display: flex; align-items: flex-start; }
nav { position: sticky; top: 0; width: 260px; flex: none; height: 100vh; overflow: auto; padding: 20px 16px; background: var(--soft); border-right: 1px solid var(--line); font-size: 14px; }
nav h2 { font-size: 12px; text-transform: uppercase; letter-spacing: .06em; color: var(--muted); margin: 18px 0 6px; }
nav ul { list-style: none; margin: 0; padding: 0; }
nav li { margin: 2px 0; }
nav a { color: var(--fg); text-decoration: none; }
nav a:hover { color: var(--accent); }
main { flex: 1; min-width: 0; max-width: 1100px; padding: 24px 40px 80px; }
h1 { margin: 0 0 4px; font-size: 28px; }
h2.section { margin-top: 48px; padding-bottom: 6px; border-bottom: 2px solid var(--line); }
h3 { margin: 0 0 6px; font-size: 18px; }
h4 { margin: 18px 0 6px; font-size: 15px; }
a { color: var(--accent); }
code { font: 13px/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; background: var(--soft); padding: 1px 4px; border-radius: 3px; }
table { width: 100%; border-collapse: collapse; margin: 6px 0 12px; font-size: 14px; }
th, td { text-align: left; vertical-align: top; padding: 6px 8px; border-bottom: 1px solid var(--line); }
th { background: var(--soft); font-weight: 600; }
td p { margin: 0 0 4px; }
td ul { margin: 2px 0; padding-left: 18px; }
.operation { margin: 22px 0; padding: 18px 20px; border: 1px solid var(--line); border-radius: 8px; }
.method { display: inline-block; min-width: 56px; text-align: center; padding: 2px 8px; border-radius: 4px; color: #fff; font-size: 13px; font-weight: 700; }
.method.get { background: #1f7a4d; } .method.post { background: #0b5cad; } .method.put, .method.patch { background: #9a6700; } .method.delete { background: #b42318; }
.path { font-size: 15px; background: none; }
.summary { margin: 4px 0 8px; font-weight: 600; }
.opid { font-weight: 400; color: var(--muted); margin-left: 8px; font-size: 13px; }
.event { font-weight: 600; margin-left: 6px; }
.note { color: var(--muted); margin: 4px 0; }
.rules { color: var(--muted); font-size: 13px; margin-top: 2px; }
.badge { display: inline-block; font-size: 11px; padding: 0 6px; border-radius: 8px; font-weight: 600; }
.badge.req { background: #e7f0fb; color: var(--accent); }
.badge.dep { background: #fdecea; color: #b42318; }
tr.deprecated td:first-child code { text-decoration: line-through; }
.status { display: inline-block; min-width: 42px; text-align: center; font-weight: 700; border-radius: 4px; padding: 0 6px; }
.status.ok { background: #e6f4ea; color: #1f7a4d; } .status.err { background: #fdecea; color: #b42318; }
.schema { margin: 22px 0; }
.intro h3 { margin-top: 22px; }
pre { margin: 4px 0 10px; padding: 10px 12px; background: var(--soft); border: 1px solid var(--line); border-radius: 6px; overflow-x: auto; }
pre code { background: none; padding: 0; white-space: pre; }
.example h4 { margin-top: 14px; }
@media (max-width: 900px) { .layout { display: block; } nav { position: static; width: auto; height: auto; } main { padding: 16px; } }
`;

/** How a receiver verifies a delivery: both signatures, with the SDK (docs/webhook-verification.md has the rest). */
export const WEBHOOK_VERIFICATION_SNIPPET = `import { verifyWebhook, WebhookVerificationError } from '@payment-gateway/sdk';

// rawBody: the exact bytes received (Buffer), before any JSON parsing
const event = verifyWebhook(rawBody, req.headers, process.env.WEBHOOK_SECRET, { toleranceSeconds: 300 });
if (event.type === 'invoice.paid') markPaid(event.data.invoice.orderId, event.id);`;

const WEBHOOK_VERIFICATION_HTML = `<section class="intro" id="webhook-verification">
<h3>Проверка подписи</h3>
<p>Каждая доставка несёт две подписи на webhook_secret проекта: <code>X-Service-Signature</code> (<code>sha256=</code> и hex HMAC-SHA256 сырого тела, как в спецификации) и <code>X-Service-Signature-Timestamped</code> (<code>t=&lt;секунды Unix&gt;,v2=&lt;hex HMAC-SHA256 строки «webhook.t.сырое тело»&gt;</code>). Проверяйте сырые байты тела, сравнивайте за постоянное время (<code>crypto.timingSafeEqual</code> после проверки длины) и отклоняйте доставку, если <code>t</code> дальше допуска от ваших часов: так старую доставку нельзя прислать повторно. Обработка идемпотентна по <code>id</code> события.</p>
<pre tabindex="0" class="sdk"><code>${escapeHtml(WEBHOOK_VERIFICATION_SNIPPET)}</code></pre>
</section>`;

/** The whole docs page: navigation, the description, operations by tag, webhooks, security, schemas. */
export function renderDocsPage(doc: OpenApiDocument, examples: Readonly<Record<string, OperationExample>> = OPERATION_EXAMPLES): string {
  const base = doc.servers[0]?.url ?? '';
  const operations = operationsOf(doc.paths);
  const webhooks = operationsOf(doc.webhooks);
  const tags = doc.tags.map((t) => t.name).filter((t) => operations.some((o) => o.op.tags.includes(t)));

  const nav: string[] = ['<nav>', `<strong>${e(doc.info.title)}</strong>`, '<h2>Описание</h2><ul><li><a href="#intro">Введение</a></li><li><a href="#security">Авторизация</a></li></ul>'];
  for (const tag of tags) {
    nav.push(`<h2>${e(tag)}</h2><ul>`);
    for (const { method, path, op } of operations.filter((o) => o.op.tags.includes(tag))) {
      nav.push(`<li><a href="#op-${e(op.operationId)}">${e(method.toUpperCase())} ${e(path)}</a></li>`);
    }
    nav.push('</ul>');
  }
  nav.push('<h2>Вебхуки</h2><ul>');
  for (const [kind] of Object.entries(doc.webhooks)) nav.push(`<li><a href="#webhook-${e(kind)}">${e(kind)}</a></li>`);
  nav.push('</ul><h2>Схемы</h2><ul>');
  for (const name of Object.keys(doc.components.schemas)) nav.push(`<li>${schemaLink(name)}</li>`);
  nav.push('</ul></nav>');

  const main: string[] = [
    '<main>',
    `<h1>${e(doc.info.title)}</h1>`,
    `<p class="note">Версия описания ${e(doc.info.version)} · OpenAPI ${e(doc.openapi)} · базовый путь <code>${e(base)}</code> · машиночитаемое описание: <a href="${e(base)}/openapi.json">${e(base)}/openapi.json</a></p>`,
    doc.info.summary ? `<p>${inline(doc.info.summary)}</p>` : '',
    // The description's own headings are h3: under an h2 of their own, as the headings' order requires.
    `<section class="intro" id="intro"><h2 class="section">Введение</h2>${markdown(doc.info.description)}</section>`,
    '<h2 class="section" id="security">Авторизация</h2>',
    `<p>Каждый метод принимает один из вариантов: ${doc.security.map((r) => Object.keys(r).map((k) => `<code>${e(k)}</code>`).join(' + ')).join(' или ')}.</p>`,
    '<table><thead><tr><th>Схема</th><th>Тип</th><th>Описание</th></tr></thead><tbody>',
    ...Object.entries(doc.components.securitySchemes).map(
      ([name, s]) =>
        `<tr><td><code>${e(name)}</code></td><td>${s.type === 'http' ? `HTTP ${e(s.scheme)}` : `заголовок <code>${e(s.name)}</code>`}</td><td>${inline(s.description)}</td></tr>`,
    ),
    '</tbody></table>',
  ];
  for (const tag of tags) {
    const description = doc.tags.find((t) => t.name === tag)?.description;
    main.push(`<h2 class="section">${e(tag)}</h2>`, description ? `<p>${inline(description)}</p>` : '');
    for (const { method, path, op } of operations.filter((o) => o.op.tags.includes(tag))) main.push(operationHtml(doc, method, path, op, base, examples));
  }
  main.push('<h2 class="section" id="webhooks">Вебхуки</h2>', WEBHOOK_VERIFICATION_HTML);
  for (const { path, op } of webhooks) main.push(webhookHtml(path, op));
  main.push('<h2 class="section" id="schemas">Схемы</h2>');
  for (const [name, schema] of Object.entries(doc.components.schemas)) {
    main.push(`<section class="schema" id="schema-${e(name)}">
<h3>${e(name)}</h3>
${schema.description ? `<p>${inline(schema.description)}</p>` : ''}
${fieldsTable(schema)}
${schemaNotes(schema)}
</section>`);
  }
  main.push('</main>');

  return `<!DOCTYPE html>
<html lang="ru">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${e(doc.info.title)} ${e(doc.info.version)}: документация</title>
<style>${STYLE}</style>
</head>
<body>
<div class="layout">
${nav.join('\n')}
${main.filter(Boolean).join('\n')}
</div>
</body>
</html>
`;
}
