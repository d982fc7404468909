import { ATTEMPT_HISTORY_LENGTH, ATTEMPT_OUTCOMES } from './command.js';
import type { AttemptOutcome, AttemptRecord, CommandRecord } from './command.js';

/**
 * A command's history as its record shows it. The stores write every attempt that did not succeed
 * into the history column — a JSON array of `{ startedAt, finishedAt, instance, outcome, error }`,
 * times in epoch milliseconds, oldest first, at most ATTEMPT_HISTORY_LENGTH — in the same UPDATE as
 * its outcome. A success is not written there: the row itself describes it (its claim's start,
 * its finish, its claimer), so completing, the commonest write of all, costs nothing more. This adds
 * it back. Adapters hand the column's text (null: none) and the row's own fields; an entry of any
 * other shape is a corrupt row, and says so.
 */
export function readAttemptHistory(
  json: string | null,
  row: Pick<CommandRecord, 'status' | 'startedAt' | 'finishedAt' | 'claimedBy'>,
): AttemptRecord[] {
  const entries = json === null || json === '' ? [] : (JSON.parse(json) as unknown);
  if (!Array.isArray(entries)) throw new Error('the attempt history of a command is not a JSON array');
  const written = entries.map(toAttempt);
  if (row.status !== 'SUCCESS' || row.finishedAt === null) return written;
  const success: AttemptRecord = {
    startedAt: row.startedAt,
    finishedAt: row.finishedAt,
    instance: row.claimedBy,
    outcome: 'succeeded',
    error: null,
  };
  return [...written, success].slice(-ATTEMPT_HISTORY_LENGTH);
}

function toAttempt(entry: unknown): AttemptRecord {
  const e = (entry ?? {}) as Record<string, unknown>;
  const outcome = e['outcome'];
  if (!ATTEMPT_OUTCOMES.includes(outcome as AttemptOutcome) || typeof e['finishedAt'] !== 'number') {
    throw new Error(`unreadable attempt in a command's history: ${JSON.stringify(entry)}`);
  }
  return {
    startedAt: typeof e['startedAt'] === 'number' ? new Date(e['startedAt']) : null,
    finishedAt: new Date(e['finishedAt']),
    instance: typeof e['instance'] === 'string' ? e['instance'] : null,
    outcome: outcome as AttemptOutcome,
    error: typeof e['error'] === 'string' ? e['error'] : null,
  };
}
