import * as E from 'fp-ts/lib/Either.js';
import {
  DEFAULT_PRIORITY,
  InvalidArgumentError,
  LIMITS,
  PRIORITY_RANGE,
  requireInt,
  refuseNul,
  requireHeadersJson,
  requireStoredTime,
  serialisePayload,
  UnknownCommandTypeError,
  type Clock,
  type CommandHeaders,
  type CommandId,
  type DependencyRef,
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

/** Options of `client.submit` (and a transaction's `submit`): a submit's, and what it waits for. */
export interface DependentSubmitOptions extends SubmitOptions {
  /**
   * Commands this one waits for, by id (or `{ id, onFailure }`): it is WAITING, in no claim, until
   * every one has succeeded, then PENDING. When one ends DEAD or CANCELLED it is cancelled
   * (`onFailure: 'cancel'`, the default) or counts that end as finished (`'continue'`). Each must
   * exist (NOT_FOUND otherwise), at most LIMITS.dependencies, none twice; their rows are locked until
   * the transaction ends. Needs the store's own transaction handle (not an ORM's SqlExecutor).
   * Empty or left out: an ordinary submit. See docs/workflows.md.
   */
  readonly dependsOn?: readonly (CommandId | DependencyRef)[];
}

/** Every option a submit takes, by name: anything else is a misspelling, refused (see requireSubmitOptions). */
export const SUBMIT_OPTION_NAMES: readonly (keyof SubmitOptions)[] = [
  'bizKey',
  'runAt',
  'maxRetry',
  'owner',
  'headers',
  'priority',
  'orderingKey',
];

/**
 * A submit's options as given: absent, or an object with no names but `known` — a misspelt option
 * (`prioirty`) would otherwise be ignored and the command stored with the default. `what` names the
 * call in the error ("submit options", "a submitMany item").
 */
export function requireSubmitOptions<T extends object>(
  what: string,
  options: unknown,
  known: readonly string[],
): Partial<T> {
  if (options === undefined) return {};
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new InvalidArgumentError(
      `${what} must be an object or left out, not ${options === null ? 'null' : Array.isArray(options) ? 'an array' : typeof options}`,
    );
  }
  const unknown = Object.keys(options).filter((name) => !known.includes(name));
  if (unknown.length > 0) {
    const named = unknown
      .slice(0, 3)
      .map((name) => JSON.stringify(name.length > 40 ? `${name.slice(0, 40)}…` : name))
      .join(', ');
    throw new InvalidArgumentError(
      `${what}: unknown option${unknown.length > 1 ? 's' : ''} ${named}${unknown.length > 3 ? ', …' : ''}; ` +
        `the options are ${known.join(', ')}`,
    );
  }
  return options as Partial<T>;
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
  given?: SubmitOptions,
  optionNames: readonly string[] = SUBMIT_OPTION_NAMES,
  what = 'submit options',
): NewCommand {
  const options = requireSubmitOptions<SubmitOptions>(what, given, optionNames);
  const entry = rules.registry.get(type);
  if (!entry && !rules.submitOnlyTypes.includes(type)) {
    throw new UnknownCommandTypeError(String(type), [...rules.registry.types(), ...rules.submitOnlyTypes]);
  }
  const payloadJson = serialisePayload(payload, rules.maxPayloadBytes);
  if (E.isLeft(payloadJson)) throw payloadJson.left;
  const { bizKey = null, owner = rules.owner } = options;
  const runAt = requireStoredTime('runAt', options.runAt ?? rules.clock.now());
  checkText('bizKey', bizKey, LIMITS.submitBizKeyChars);
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
  checkText('orderingKey', orderingKey, LIMITS.orderingKeyChars);
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

/** The options `client.submit` takes: a submit's and dependsOn. */
export const DEPENDENT_SUBMIT_OPTION_NAMES: readonly string[] = [...SUBMIT_OPTION_NAMES, 'dependsOn'];

/**
 * A submit's `dependsOn` as the store takes it (its ids and rules are checked there, before
 * anything is written): an array of ids or `{ id, onFailure }`, at most LIMITS.dependencies.
 */
export function toDependencyRefs(dependsOn: unknown): DependencyRef[] {
  if (dependsOn === undefined) return [];
  if (!Array.isArray(dependsOn) || dependsOn.length > LIMITS.dependencies) {
    throw new InvalidArgumentError(
      `dependsOn must be an array of at most ${LIMITS.dependencies} command ids or { id, onFailure }`,
    );
  }
  return dependsOn.map((d: unknown): DependencyRef => {
    if (typeof d === 'string') return { id: d };
    if (typeof d === 'object' && d !== null && !Array.isArray(d)) {
      const extra = Object.keys(d).find((key) => key !== 'id' && key !== 'onFailure');
      if (extra === undefined) return d as DependencyRef;
    }
    throw new InvalidArgumentError('a dependency is a command id or { id, onFailure }');
  });
}
