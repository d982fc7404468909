// @ts-check
/* The asynccmd dashboard: the admin API, with the token of the login form (see app.js). Values from the table go on the page as text only. */

export const TOKEN_KEY = 'asynccmd.adminToken';
const baseMeta = document.querySelector('meta[name="asynccmd-base"]');
const BASE = baseMeta instanceof HTMLMetaElement ? baseMeta.content : '';

/** What the page does when the API refuses the token (app.js: back to the login form). */
let onUnauthorized = () => {};

/** @param {() => void} handler */
export function whenUnauthorized(handler) {
  onUnauthorized = handler;
}

export class ApiError extends Error {
  /**
   * @param {number} status
   * @param {string} code
   * @param {string} message
   */
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/**
 * @param {string} path under the admin routes, e.g. '/commands?status=DEAD'
 * @param {{ method?: 'GET' | 'POST', body?: unknown }} [options]
 * @returns {Promise<any>}
 */
export async function api(path, options = {}) {
  /** @type {Record<string, string>} */
  const headers = { Accept: 'application/json' };
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers['Authorization'] = `Bearer ${token}`;
  const method = options.method ?? 'GET';
  if (method === 'POST') headers['Content-Type'] = 'application/json';
  const res = await fetch(`${BASE}${path}`, {
    method,
    headers,
    body: method === 'POST' ? JSON.stringify(options.body ?? {}) : undefined,
    credentials: 'omit',
    cache: 'no-store',
    redirect: 'error',
  });
  const text = await res.text();
  /** @type {any} */
  let body = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    body = null;
  }
  if (!res.ok) {
    const error = body && body.error ? body.error : { code: `HTTP_${res.status}`, message: res.statusText };
    if (res.status === 401) onUnauthorized();
    throw new ApiError(res.status, String(error.code), String(error.message));
  }
  return body;
}

/** @param {unknown} e */
export function describe(e) {
  if (e instanceof ApiError) return `${e.code}: ${e.message}`;
  return e instanceof Error ? e.message : String(e);
}
