/**
 * What a SUCCESS writes on a row as the adapters move it to the history (their `now` expression
 * given); every other column moves as it is.
 */
export function succeededValues(now: string): Record<string, string> {
  return { status: `'SUCCESS'`, lease_until: 'NULL', finished_at: now, updated_at: now, last_error: 'NULL' };
}
