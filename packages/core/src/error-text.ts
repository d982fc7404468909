import { LIMITS } from './limits.js';
/** Fits a 500-character column with room to spare for multibyte text. */
export const LAST_ERROR_MAX_CHARS = LIMITS.lastErrorChars;

/**
 * Cuts error text to at most `max` UTF-16 code units without leaving half a surrogate pair behind
 * (a lone surrogate is invalid UTF-8 and would be refused or mangled by the database).
 */
export function truncateErrorText(text: string, max: number = LAST_ERROR_MAX_CHARS): string {
  if (text.length <= max) return text;
  let end = Math.max(0, max);
  const last = text.charCodeAt(end - 1);
  if (end > 0 && last >= 0xd800 && last <= 0xdbff) end -= 1;
  return text.slice(0, end);
}

/** The message of a thrown value, never its stack: a stack dump is noise in a 480-character column. */
export function describeFailure(error: unknown): string {
  if (error instanceof Error) {
    const name = error.name && error.name !== 'Error' ? `${error.name}: ` : '';
    return `${name}${error.message || '(no message)'}`;
  }
  if (typeof error === 'string') return error;
  try {
    return JSON.stringify(error) ?? String(error);
  } catch {
    return String(error);
  }
}

/** `scheme://user:password@`: the password of a URL's user part. */
const URL_CREDENTIALS = /\b([a-z][a-z0-9+.-]*:\/\/[^\s:/?#@]*):[^\s/?#@]*@/gi;
/**
 * `password=…`, `pwd: …`, `"secret":"…"`, `api_key=…`, `token=…` and the like, in a query string,
 * a DSN, a log line or JSON: the value up to the next separator.
 */
const SECRET_PAIR =
  /\b((?:[a-z0-9_-]*(?:password|passwd|pwd|secret|token|api[_-]?key|access[_-]?key|auth))["']?\s*[=:]\s*)("[^"]*"|'[^']*'|[^\s&;,'")}\]]+)/gi;
/** `Authorization: Bearer …` / `Basic …`. */
const AUTHORIZATION = /\b(bearer|basic)\s+[a-z0-9._~+/=-]{8,}/gi;

/**
 * The runtime's default `redactError`: error text with the secrets it commonly carries replaced by
 * `***` — a URL's password (`postgres://app:***@db/orders`), `password=`-style pairs (also
 * `secret`, `token`, `api_key`, `pwd`, in `=` or `:` form, quoted or not) and bearer or basic
 * credentials — before it is stored as lastError, where every dashboard user reads it.
 */
export function redactErrorText(text: string): string {
  return text
    .replace(URL_CREDENTIALS, '$1:***@')
    .replace(SECRET_PAIR, (_match, key: string, value: string) =>
      value.startsWith('"') ? `${key}"***"` : value.startsWith("'") ? `${key}'***'` : `${key}***`,
    )
    .replace(AUTHORIZATION, '$1 ***');
}
