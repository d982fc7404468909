/**
 * Where a command stands. The row's `status` column holds exactly these strings. WAITING: held
 * until the commands it depends on have finished (docs/workflows.md); no claim ever selects it.
 */
export type CommandStatus = 'WAITING' | 'PENDING' | 'RUNNING' | 'SUCCESS' | 'DEAD' | 'CANCELLED';

export const COMMAND_STATUSES: readonly CommandStatus[] = [
  'WAITING',
  'PENDING',
  'RUNNING',
  'SUCCESS',
  'DEAD',
  'CANCELLED',
];

/**
 * An idempotency key is held only while a command is in one of these (a WAITING command is
 * unfinished too, but holds no key: a workflow's steps are submitted without one).
 */
export const ACTIVE_STATUSES: readonly CommandStatus[] = ['PENDING', 'RUNNING'];

/** Nothing happens to a command in these states unless a person acts (DEAD) or never again. */
export const FINISHED_STATUSES: readonly CommandStatus[] = ['SUCCESS', 'DEAD', 'CANCELLED'];

export function isCommandStatus(value: unknown): value is CommandStatus {
  return typeof value === 'string' && (COMMAND_STATUSES as readonly string[]).includes(value);
}
