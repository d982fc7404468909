import * as E from 'fp-ts/lib/Either.js';
import {
  DEFAULT_PRIORITY,
  InvalidArgumentError,
  MAX_ORDERING_KEY_CHARS,
  PRIORITY_RANGE,
  requireInt,
  refuseNul,
  requireHeadersJson,
  requireStoredTime,
  serialisePayload,
  UnknownCommandTypeError,
  type Clock,
  type CommandHeaders,
  type NewCommand,
} from '@asynccmd/core';
import type { ExecutorRegistry } from './executor-registry.js';
import { MAX_OWNER_LENGTH, MAX_RETRY_LIMIT } from './options-validation.js';

/** Options of one submit. */
export interface SubmitOptions {
  /** Business key for tracing (and for idempotency with submitIdempotent); at most 128 characters. */
  readonly bizKey?: string | null;
  /** Due time (a delayed command), in the years 1000 to 9999; default: now on the runtime's clock. */
  readonly runAt?: Date | null;
  /** Retries after the first attempt; default: the executor's, else the runtime's (5). */
  readonly maxRetry?: number;
  /** Submitting service; default: the runtime's `owner`. */
  readonly owner?: string | null;
  /** Extra headers stored with the command (merged over the headers provider's), within core HEADER_LIMITS. */
  readonly headers?: CommandHeaders;
  /**
   * Claim order: lower numbers are claimed first (core PRIORITY_RANGE); default: the runtime's
   * `typePriorities` for the type, else 0. Strict: a steady stream of urgent commands can keep
   * less urgent ones waiting.
   */
  readonly priority?: number;
  /**
   * Commands with the same key run one at a time, in submission order, across all instances; a
   * DEAD one holds the key until a person retries, cancels or kills it. At most 128 characters.
   */
  readonly orderingKey?: string | null;
}

export interface SubmitRules {
  readonly registry: ExecutorRegistry;
  /** Types this process submits but another process executes. */
  readonly submitOnlyTypes: readonly string[];
  readonly maxPayloadBytes: number;
  readonly defaultMaxRetry: number;
  /** Default priority by type (options `typePriorities`). */
  readonly typePriorities: Readonly<Record<string, number>>;
  readonly owner: string | null;
  readonly headers: () => CommandHeaders;
  /**
   * Due times are judged on the application clock (claims pass `now` from it), so "now" at submit
   * comes from the same clock: an IMMEDIATE claim right after commit then always finds it due.
   */
  readonly clock: Clock;
}

/**
 * Turns a submit into the row to insert, or throws a typed error before anything is written:
 * unknown type, payload not JSON-serialisable or too large, malformed options — by the rules every
 * store holds to (core input-checks), so a submit the client accepts no store refuses.
 */
export function toNewCommand(
  rules: SubmitRules,
  type: string,
  payload: unknown,
  options: SubmitOptions = {},
): NewCommand {
  const entry = rules.registry.get(type);
  if (!entry && !rules.submitOnlyTypes.includes(type)) {
    throw new UnknownCommandTypeError(String(type), [...rules.registry.types(), ...rules.submitOnlyTypes]);
  }
  const payloadJson = serialisePayload(payload, rules.maxPayloadBytes);
  if (E.isLeft(payloadJson)) throw payloadJson.left;
  const { bizKey = null, owner = rules.owner } = options;
  const runAt = requireStoredTime('runAt', options.runAt ?? rules.clock.now());
  checkText('bizKey', bizKey, 128);
  checkText('owner', owner, MAX_OWNER_LENGTH);
  const maxRetry = options.maxRetry ?? entry?.maxRetry ?? rules.defaultMaxRetry;
  if (!(Number.isInteger(maxRetry) && maxRetry >= 0 && maxRetry <= MAX_RETRY_LIMIT)) {
    throw new InvalidArgumentError(
      `maxRetry must be an integer from 0 to ${MAX_RETRY_LIMIT}, not ${String(maxRetry)}`,
    );
  }
  const headers = { ...rules.headers(), ...options.headers };
  requireHeadersJson(headers);
  const byType = Object.hasOwn(rules.typePriorities, type) ? rules.typePriorities[type] : undefined;
  const priority = options.priority ?? byType ?? DEFAULT_PRIORITY;
  requireInt('priority', priority, PRIORITY_RANGE.min, PRIORITY_RANGE.max);
  const orderingKey = options.orderingKey ?? null;
  checkText('orderingKey', orderingKey, MAX_ORDERING_KEY_CHARS);
  return {
    type,
    payloadJson: payloadJson.right,
    bizKey,
    runAt,
    maxRetry,
    owner,
    headers,
    priority,
    ...(orderingKey !== null ? { orderingKey } : {}),
  };
}

function checkText(name: string, value: unknown, max: number): void {
  if (value === null) return;
  if (typeof value !== 'string' || value.length === 0 || value.length > max) {
    throw new InvalidArgumentError(`${name} must be a non-empty string of at most ${max} characters`);
  }
  refuseNul(name, value);
}
