import type { CommandStatus } from './status.js';

/**
 * Every error asynccmd raises on purpose carries a stable `code`, so callers (and the admin HTTP
 * layer) can branch on it without `instanceof` across package copies.
 */
export type AsyncCommandErrorCode =
  | 'ILLEGAL_TRANSITION'
  | 'STALE_CLAIM'
  | 'NOT_FOUND'
  | 'INVALID_ID'
  | 'UNKNOWN_COMMAND_TYPE'
  | 'PAYLOAD_NOT_SERIALISABLE'
  | 'PAYLOAD_TOO_LARGE'
  | 'RESULT_NOT_SERIALISABLE'
  | 'RESULT_TOO_LARGE'
  | 'INVALID_IDENTIFIER'
  | 'INVALID_ARGUMENT'
  | 'IDEMPOTENCY_CONFLICT'
  | 'TRANSACTION_ROLLED_BACK'
  | 'TRANSACTION_CLOSED'
  | 'STORE_CONTENTION'
  | 'SCHEDULE_EXISTS'
  | 'SCHEDULE_DECLARED_IN_CODE';

export class AsyncCommandError extends Error {
  readonly code: AsyncCommandErrorCode;
  constructor(code: AsyncCommandErrorCode, message: string) {
    super(message);
    this.name = 'AsyncCommandError';
    this.code = code;
  }
}

/** A transition asked of a command in a state that does not allow it. */
export class IllegalTransitionError extends AsyncCommandError {
  constructor(
    readonly transition: string,
    readonly from: CommandStatus,
    readonly allowed: readonly CommandStatus[],
    readonly commandId?: string,
  ) {
    super(
      'ILLEGAL_TRANSITION',
      `cannot ${transition} command${commandId ? ` ${commandId}` : ''}: it is ${from}` +
        ` (${transition} is allowed only from ${allowed.join(' or ')})`,
    );
    this.name = 'IllegalTransitionError';
  }
}

/** The caller's claim token no longer owns the command (it was reclaimed, requeued or killed). */
export class StaleClaimError extends AsyncCommandError {
  constructor(readonly commandId?: string) {
    super(
      'STALE_CLAIM',
      `command${commandId ? ` ${commandId}` : ''} is no longer held by this claim ` +
        '(it was reclaimed, requeued or killed meanwhile); the outcome was not recorded',
    );
    this.name = 'StaleClaimError';
  }
}

export class CommandNotFoundError extends AsyncCommandError {
  constructor(readonly commandId: string) {
    super('NOT_FOUND', `command ${commandId} does not exist`);
    this.name = 'CommandNotFoundError';
  }
}

export class InvalidCommandIdError extends AsyncCommandError {
  constructor(readonly input: unknown) {
    super('INVALID_ID', `${describe(input)} is not a command id (expected a positive integer)`);
    this.name = 'InvalidCommandIdError';
  }
}

export class UnknownCommandTypeError extends AsyncCommandError {
  constructor(
    readonly commandType: string,
    readonly known: readonly string[] = [],
  ) {
    super(
      'UNKNOWN_COMMAND_TYPE',
      `no executor is registered for command type ${JSON.stringify(commandType)}` +
        (known.length ? ` (known: ${known.join(', ')})` : ''),
    );
    this.name = 'UnknownCommandTypeError';
  }
}

export class PayloadNotSerialisableError extends AsyncCommandError {
  constructor(reason: string) {
    super('PAYLOAD_NOT_SERIALISABLE', `payload is not JSON-serialisable: ${reason}`);
    this.name = 'PayloadNotSerialisableError';
  }
}

export class PayloadTooLargeError extends AsyncCommandError {
  constructor(
    readonly bytes: number,
    readonly limit: number,
  ) {
    super('PAYLOAD_TOO_LARGE', `payload is ${bytes} bytes as JSON, over the limit of ${limit} bytes`);
    this.name = 'PayloadTooLargeError';
  }
}

/** A result given to `ctx.setResult` that JSON would not bring back the same (see serialisePayload). */
export class ResultNotSerialisableError extends AsyncCommandError {
  constructor(reason: string) {
    super('RESULT_NOT_SERIALISABLE', `result is not JSON-serialisable: ${reason}`);
    this.name = 'ResultNotSerialisableError';
  }
}

export class ResultTooLargeError extends AsyncCommandError {
  constructor(
    readonly bytes: number,
    readonly limit: number,
  ) {
    super('RESULT_TOO_LARGE', `result is ${bytes} bytes as JSON, over the limit of ${limit} bytes`);
    this.name = 'ResultTooLargeError';
  }
}

export class InvalidIdentifierError extends AsyncCommandError {
  constructor(
    readonly what: string,
    readonly input: unknown,
  ) {
    super(
      'INVALID_IDENTIFIER',
      `${what} ${describe(input)} is not a valid SQL identifier ` +
        '(letters, digits and _, starting with a letter or _, at most 48 characters)',
    );
    this.name = 'InvalidIdentifierError';
  }
}

export class InvalidArgumentError extends AsyncCommandError {
  constructor(message: string) {
    super('INVALID_ARGUMENT', message);
    this.name = 'InvalidArgumentError';
  }
}

/** Admin retry of a dead command whose idempotency key is held by a newer unfinished command. */
export class IdempotencyConflictError extends AsyncCommandError {
  constructor(
    readonly commandId: string,
    readonly holderId: string | null,
  ) {
    super(
      'IDEMPOTENCY_CONFLICT',
      `command ${commandId} cannot become active again: its (type, bizKey) is held by unfinished command ` +
        `${holderId ?? '(unknown)'}`,
    );
    this.name = 'IdempotencyConflictError';
  }
}

/**
 * COMMIT ended in a rollback: a statement in the transaction had failed (and its error was caught),
 * so nothing in it was written — neither the business rows nor the commands submitted in it.
 */
export class TransactionRolledBackError extends AsyncCommandError {
  constructor(message = 'the transaction was rolled back at COMMIT: a statement in it had failed') {
    super('TRANSACTION_ROLLED_BACK', message);
    this.name = 'TransactionRolledBackError';
  }
}

/**
 * A transactional executor's transaction (`ctx.tx`, `ctx.submit`) used once it is over: the
 * executor returned, failed or was given up on (timeout, lost claim, shutdown), and the
 * transaction committed or rolled back. A write then would land outside it, so it is refused.
 */
export class TransactionClosedError extends AsyncCommandError {
  constructor(readonly commandId: string) {
    super(
      'TRANSACTION_CLOSED',
      `the transaction of command ${commandId}'s attempt is over (the executor returned or was given up on); it can no longer be used`,
    );
    this.name = 'TransactionClosedError';
  }
}

/**
 * A store operation gave up because other writers kept changing what it works on (an admin
 * transition whose row kept moving, an idempotent submit whose key holder kept finishing under it).
 * Nothing was written by it; trying again is safe.
 */
export class StoreContentionError extends AsyncCommandError {
  constructor(
    readonly operation: string,
    readonly subject: string,
  ) {
    super('STORE_CONTENTION', `${subject} kept changing while ${operation} was applied to it; try again`);
    this.name = 'StoreContentionError';
  }
}

const CODES: ReadonlySet<string> = new Set<AsyncCommandErrorCode>([
  'ILLEGAL_TRANSITION',
  'STALE_CLAIM',
  'NOT_FOUND',
  'INVALID_ID',
  'UNKNOWN_COMMAND_TYPE',
  'PAYLOAD_NOT_SERIALISABLE',
  'PAYLOAD_TOO_LARGE',
  'INVALID_IDENTIFIER',
  'INVALID_ARGUMENT',
  'IDEMPOTENCY_CONFLICT',
  'TRANSACTION_ROLLED_BACK',
  'TRANSACTION_CLOSED',
  'STORE_CONTENTION',
  'SCHEDULE_EXISTS',
  'SCHEDULE_DECLARED_IN_CODE',
]);

/** True for any asynccmd error, even one thrown by another copy of this package. */
export function isAsyncCommandError(e: unknown): e is AsyncCommandError {
  return e instanceof Error && CODES.has(String((e as { code?: unknown }).code));
}

function describe(input: unknown): string {
  if (typeof input === 'string') return JSON.stringify(input.length > 64 ? `${input.slice(0, 64)}…` : input);
  return String(input);
}
