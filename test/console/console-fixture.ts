/**
 * The operator console as the console tests use it: form posts, the session cookie,
 * the form token of a page.
 */
export interface Page {
  readonly status: number;
  readonly headers: Headers;
  readonly html: string;
  readonly location: string | null;
  readonly setCookie: string | null;
}

/** One request without following redirects (a 303 is what the tests look at). */
export async function request(
  baseUrl: string,
  method: 'GET' | 'POST',
  path: string,
  init: { cookie?: string | null; form?: Record<string, string>; headers?: Record<string, string> } = {},
): Promise<Page> {
  const headers: Record<string, string> = { ...(init.headers ?? {}) };
  if (init.cookie) headers.cookie = init.cookie;
  let body: string | undefined;
  if (init.form) {
    headers['content-type'] = 'application/x-www-form-urlencoded';
    body = new URLSearchParams(init.form).toString();
  }
  const response = await fetch(`${baseUrl}${path}`, { method, headers, body, redirect: 'manual' });
  return {
    status: response.status,
    headers: response.headers,
    html: await response.text(),
    location: response.headers.get('location'),
    setCookie: response.headers.get('set-cookie'),
  };
}

/** The `name=value` part of a Set-Cookie header (what a browser sends back). */
export function cookieOf(setCookie: string | null): string {
  if (!setCookie) throw new Error('no Set-Cookie in the answer');
  return setCookie.split(';')[0]!;
}

/** Logs in with the token; answers the session cookie to send back. */
export async function login(baseUrl: string, token: string, headers?: Record<string, string>): Promise<string> {
  const answer = await request(baseUrl, 'POST', '/admin/login', { form: { token }, headers });
  if (answer.status !== 303) throw new Error(`login answered ${answer.status}: ${answer.html.slice(0, 300)}`);
  return cookieOf(answer.setCookie);
}

/** The form token of a console page (every form of a session carries it). */
export function formTokenOf(html: string): string {
  const match = /<input type="hidden" name="formToken" value="([^"]+)">/.exec(html);
  if (!match) throw new Error('no form token on the page');
  return match[1]!;
}

/** The headers every console page carries. */
export const CONSOLE_SECURITY_HEADERS = {
  'content-security-policy': "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
};
