import type { AttemptReport } from './attempts.js';

export type TestKitErrorCode = 'DRAIN_LIMIT' | 'DRAIN_IN_PROGRESS' | 'DATABASE_CLOCK';

/** Errors of the test kit carry a stable `code`, like the runtime's. */
export class TestKitError extends Error {
  constructor(
    readonly code: TestKitErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'TestKitError';
  }
}

/**
 * drainUntilIdle() ran its maximum of rounds and commands were still due: most often an executor
 * that submits a command every time it runs. What was claimed for the next round was put back.
 */
export class DrainLimitError extends TestKitError {
  constructor(
    readonly rounds: number,
    /** Every attempt of the drain, as drainUntilIdle would have returned them. */
    readonly attempts: readonly AttemptReport[],
    /** Types of the commands still due, one entry per command. */
    readonly stillDue: readonly string[],
  ) {
    super(
      'DRAIN_LIMIT',
      `drainUntilIdle() stopped after ${rounds} rounds with ${stillDue.length} command(s) still due ` +
        `(${countByType(stillDue)}): an executor probably submits a new command every time it runs. ` +
        'Raise maxRounds if the chain is meant to be this long.',
    );
    this.name = 'DrainLimitError';
  }
}

function countByType(types: readonly string[]): string {
  const counts = new Map<string, number>();
  for (const type of types) counts.set(type, (counts.get(type) ?? 0) + 1);
  return [...counts].map(([type, n]) => `${type} ×${n}`).join(', ');
}
