/** The seed's limit: a 500-character column with room to spare for multibyte text. */
export const LAST_ERROR_MAX_CHARS = 480;

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
