import { DEFAULT_PRIORITY, MAX_ORDERING_KEY_CHARS, PRIORITY_RANGE } from '../command.js';
import { requireProgress } from '../command.js';
import type { ClaimRef, CommandId, CompletedAttempt, NewCommand, ProgressReport } from '../command.js';
import { truncateErrorText } from '../error-text.js';
import { InvalidArgumentError } from '../errors.js';
import { LIMITS } from '../limits.js';
import { isSqlExecutor, type SqlExecutor } from '../ports/sql-executor.js';
import {
  optionalReason,
  optionalText,
  requireFailureOutcome,
  requireHealthProbeParams,
  requireHeadersJson,
  requireId,
  requireInstant,
  requireInt,
  requireOnPending,
  requireOutcomeCountParams,
  requirePayloadJson,
  requireStatuses,
  requireStoredTime,
  requireToken,
  requireTypes,
  optionalInstance,
  decodeListCursor,
} from '../input-checks.js';
import type { ListPosition } from '../input-checks.js';
import { DEFAULT_MAX_PAYLOAD_BYTES, MAX_RESULT_BYTES } from '../payload.js';
import type {
  ClaimByIdParams,
  ClaimDueParams,
  FailedAttempt,
  HealthProbeParams,
  IdempotentInsertOptions,
  ListQuery,
  OnPending,
  OutcomeCountParams,
  PurgeParams,
  ReclaimParams,
} from '../ports/store.js';
import { FINISHED_STATUSES } from '../status.js';
import type { CommandStatus } from '../status.js';
import { rescueLimitMessage } from '../transitions.js';

/*
 * The input of every store call, checked in one place before any SQL runs: bad input is refused
 * with a typed error and never poisons a caller's transaction with a failed statement. What comes
 * out is trusted by the adapters, which only encode it for their database.
 */

const MAX_INT = LIMITS.intColumn;
/** Rows a list page holds at most, and when the query names none. */
const MAX_LIST_LIMIT = LIMITS.listRows;
const DEFAULT_LIST_LIMIT = 50;

/** Widths, in characters, of the text columns a database cannot hold longer text in. */
export interface TextWidths {
  readonly type: number;
  readonly bizKey: number;
  readonly owner: number;
  readonly token: number;
}

export interface StoreInputOptions {
  /** Largest payload accepted, in UTF-8 bytes of its JSON; default DEFAULT_MAX_PAYLOAD_BYTES. */
  readonly maxPayloadBytes?: number;
  /** Column widths to refuse longer text against; default LIMITS' (the narrowest database's columns). */
  readonly textWidths?: Partial<TextWidths>;
}

/** The widths every store refuses longer text against, from LIMITS. */
export const STORE_TEXT_WIDTHS: TextWidths = {
  type: LIMITS.typeChars,
  bizKey: LIMITS.bizKeyChars,
  owner: LIMITS.ownerChars,
  token: LIMITS.tokenChars,
};

/** A claimDue's parameters, checked. */
export interface CheckedClaimDue {
  /** Non-empty. */
  readonly types: readonly string[];
  /** As given (checked names), possibly empty: see ClaimDueParams.limitedTypes. */
  readonly limitedTypes: readonly string[];
  /** As given (checked names), possibly empty, none also in another limit: ClaimDueParams.keyedTypes. */
  readonly keyedTypes: readonly string[];
  /** As given (checked names), possibly empty, none also in another limit: ClaimDueParams.keyRatedTypes. */
  readonly keyRatedTypes: readonly string[];
  /** At least 1. */
  readonly limit: number;
  /** Clamped into the stored range. */
  readonly now: Date;
  readonly token: string;
  readonly leaseMs: number;
  readonly instance: string | null;
}

/** A claimById's parameters, checked. */
export interface CheckedClaimById {
  readonly id: CommandId;
  readonly now: Date;
  readonly token: string;
  readonly leaseMs: number;
  /** null: any type; else non-empty. */
  readonly types: readonly string[] | null;
  /** Possibly empty. */
  readonly limitedTypes: readonly string[];
  readonly instance: string | null;
}

/** A command to insert, checked: its column values before encoding. */
export interface CheckedCommand {
  readonly type: string;
  readonly bizKey: string | null;
  readonly payloadJson: string;
  readonly maxRetry: number;
  readonly runAt: Date | null;
  readonly owner: string | null;
  readonly headersJson: string;
  readonly priority: number;
  readonly orderingKey: string | null;
}

/** A success to record, checked: the claim and, if its executor left one, the result's JSON text. */
export interface CheckedCompletedAttempt {
  readonly id: CommandId;
  readonly token: string;
  readonly resultJson?: string;
}

/** A failed attempt to record, checked: the claim it ran under and what it turns into. */
export interface CheckedFailedAttempt {
  readonly id: CommandId;
  readonly token: string;
  readonly status: 'PENDING' | 'DEAD';
  readonly retryCount: number;
  readonly nextRunAt: Date;
  /** Truncated, with any NUL replaced (see errorText). */
  readonly lastError: string;
}

export interface CheckedReclaim {
  readonly limit: number;
  readonly maxRescues: number;
  /** The lastError of a command that runs out of rescues. */
  readonly deadError: string;
}

export interface CheckedListQuery {
  readonly limit: number;
  /** Rows to ask the database for: one more than `limit`, to know whether a next page exists. */
  readonly fetch: number;
  /** null: any status; possibly empty (then nothing matches). */
  readonly statuses: CommandStatus[] | null;
  readonly type: string | null;
  readonly bizKey: string | null;
  /** The page starts strictly below this position (from the cursor); null for the first page. */
  readonly after: ListPosition | null;
}

export interface CheckedPurge {
  /** Finished statuses only, each once. */
  readonly statuses: ('SUCCESS' | 'CANCELLED' | 'DEAD')[];
  readonly limit: number;
  readonly olderThan: Date;
}

/**
 * Error text for last_error: truncated as core says, with any NUL replaced (PostgreSQL text cannot
 * hold one), so recording a failure never fails because of what the failure said.
 */
export function errorText(text: string): string {
  return truncateErrorText(text.includes('\u0000') ? text.replaceAll('\u0000', '\uFFFD') : text);
}

/**
 * The transaction a submit writes in: an SqlExecutor, or the adapter's own handle as `isHandle`
 * recognises it (`expected` names it in the error). Anything else — null, a plain object, another
 * library's transaction — is refused here, before any statement runs, rather than failing inside
 * the driver with text that differs per database.
 */
export function requireTransaction<Tx>(
  tx: unknown,
  expected: string,
  isHandle: (candidate: object) => boolean,
): Tx | SqlExecutor {
  if (isSqlExecutor(tx)) return tx;
  if ((typeof tx === 'object' || typeof tx === 'function') && tx !== null && isHandle(tx)) return tx as Tx;
  throw new InvalidArgumentError(
    `a submit's transaction must be ${expected} or an SqlExecutor, not ${describeValue(tx)}`,
  );
}

/** What a value is, for an error message: its kind or class, never its contents. */
export function describeValue(value: unknown): string {
  if (value === null) return 'null';
  if (typeof value !== 'object') return typeof value === 'undefined' ? 'undefined' : `a ${typeof value}`;
  if (Array.isArray(value)) return 'an array';
  const name: unknown = (Object.getPrototypeOf(value) as { constructor?: { name?: unknown } } | null)
    ?.constructor?.name;
  return typeof name === 'string' && name !== '' && name !== 'Object' ? `a ${name}` : 'a plain object';
}

/** The checks of a store's input, with the store's own limits (payload size, column widths). */
export class StoreInput {
  /** The largest payload accepted, in UTF-8 bytes of its JSON: checked here and nowhere else. */
  readonly maxPayloadBytes: number;
  private readonly widths: Partial<TextWidths>;

  constructor(options: StoreInputOptions = {}) {
    this.maxPayloadBytes = requireInt(
      'maxPayloadBytes',
      options.maxPayloadBytes ?? DEFAULT_MAX_PAYLOAD_BYTES,
      1,
      MAX_INT,
    );
    this.widths = { ...STORE_TEXT_WIDTHS, ...options.textWidths };
  }

  /** Commands to insert, each checked, in order. */
  commands(commands: readonly NewCommand[]): CheckedCommand[] {
    if (!Array.isArray(commands)) throw new InvalidArgumentError('insert takes an array of commands');
    return commands.map((c) => this.command(c));
  }

  command(c: NewCommand): CheckedCommand {
    const type = this.text('type', c.type);
    if (!type) throw new InvalidArgumentError('a command needs a type');
    return {
      type,
      bizKey: this.text('bizKey', c.bizKey),
      payloadJson: requirePayloadJson(c.payloadJson, this.maxPayloadBytes),
      maxRetry: requireInt('maxRetry', c.maxRetry, 0, MAX_INT),
      runAt: c.runAt === undefined || c.runAt === null ? null : requireStoredTime('runAt', c.runAt),
      owner: this.text('owner', c.owner),
      headersJson: requireHeadersJson(c.headers),
      priority: requireInt(
        'priority',
        c.priority ?? DEFAULT_PRIORITY,
        PRIORITY_RANGE.min,
        PRIORITY_RANGE.max,
      ),
      orderingKey: this.orderingKey(c.orderingKey),
    };
  }

  private orderingKey(value: unknown): string | null {
    const key = optionalText('orderingKey', value);
    if (key === '') throw new InvalidArgumentError('orderingKey must be a non-empty string or null');
    if (key !== null) this.fits('orderingKey', key, MAX_ORDERING_KEY_CHARS);
    return key;
  }

  /** A command for an idempotent submit: as `command`, and its bizKey is required. */
  idempotentCommand(c: NewCommand): CheckedCommand & { readonly bizKey: string } {
    if (typeof c.bizKey !== 'string' || c.bizKey === '') {
      throw new InvalidArgumentError('an idempotent submit needs a non-empty bizKey');
    }
    const checked = this.command(c);
    return { ...checked, bizKey: checked.bizKey ?? c.bizKey };
  }

  /** What an idempotent submit does with a PENDING holder (its options are optional). */
  onPending(options: IdempotentInsertOptions | undefined): OnPending {
    if (options === undefined) return 'keep';
    if (typeof options !== 'object' || options === null) {
      throw new InvalidArgumentError('the options of an idempotent submit must be an object');
    }
    return requireOnPending(options.onPending);
  }

  id(id: unknown): CommandId {
    return requireId(id);
  }

  ids(ids: readonly CommandId[]): CommandId[] {
    if (!Array.isArray(ids)) throw new InvalidArgumentError('ids must be an array');
    return ids.map((id) => requireId(id));
  }

  /** Claims, checked, in order (duplicates kept: the adapter decides how to bind them). */
  refs(refs: readonly ClaimRef[]): ClaimRef[] {
    if (!Array.isArray(refs)) throw new InvalidArgumentError('refs must be an array of claims');
    return refs.map((r) => ({ id: requireId(r.id), token: this.token(r.token) }));
  }

  /**
   * Progress reports: each a valid ref with a valid progress (core requireProgress); of two of one
   * claim, the later one only. In the order of each claim's first report.
   */
  progressReports(reports: readonly ProgressReport[]): ProgressReport[] {
    if (!Array.isArray(reports)) throw new InvalidArgumentError('reportProgress takes an array of reports');
    const latest = new Map<string, ProgressReport>();
    for (const r of reports) {
      const ref = { id: requireId(r?.id), token: this.token(r?.token) };
      const { done, total } = requireProgress(r);
      latest.set(`${ref.id} ${ref.token}`, { ...ref, done, total });
    }
    return [...latest.values()];
  }

  /** A complete's attempts: each a valid ref, with a result of at most MAX_RESULT_BYTES of JSON text if any. */
  completedAttempts(attempts: readonly CompletedAttempt[]): CheckedCompletedAttempt[] {
    if (!Array.isArray(attempts)) throw new InvalidArgumentError('complete takes an array of claims');
    return attempts.map((a) => {
      const ref = { id: requireId(a.id), token: this.token(a.token) };
      const resultJson = a.resultJson;
      if (resultJson === undefined) return ref;
      if (
        typeof resultJson !== 'string' ||
        Buffer.byteLength(resultJson, 'utf8') > MAX_RESULT_BYTES ||
        !isJsonText(resultJson)
      ) {
        throw new InvalidArgumentError(`a result must be JSON text of at most ${MAX_RESULT_BYTES} bytes`);
      }
      return { ...ref, resultJson };
    });
  }

  token(token: unknown): string {
    const text = requireToken(token);
    this.fits('a claim token', text, this.widths.token);
    return text;
  }

  /** A claimDue's parameters; null when it can claim nothing (no types, or a limit of 0). */
  claimDue(params: ClaimDueParams): CheckedClaimDue | null {
    const limit = requireInt('limit', params.limit, 0);
    const types = requireTypes(params.types);
    const claim = {
      types,
      limit,
      token: this.token(params.token),
      leaseMs: this.leaseMs(params.leaseMs),
      now: requireInstant('now', params.now),
      instance: optionalInstance(params.instance),
      limitedTypes: params.limitedTypes === undefined ? [] : requireTypes(params.limitedTypes),
      keyedTypes: params.keyedTypes === undefined ? [] : requireTypes(params.keyedTypes),
      keyRatedTypes: params.keyRatedTypes === undefined ? [] : requireTypes(params.keyRatedTypes),
    };
    refuseTwoLimits(claim);
    return limit === 0 || types.length === 0 ? null : claim;
  }

  /** A claimById's parameters; null when `types` is given and empty (nothing can be claimed). */
  claimById(params: ClaimByIdParams): CheckedClaimById | null {
    const types = params.types === undefined ? null : requireTypes(params.types);
    const claim = {
      id: requireId(params.id),
      now: requireInstant('now', params.now),
      token: this.token(params.token),
      leaseMs: this.leaseMs(params.leaseMs),
      types,
      instance: optionalInstance(params.instance),
      limitedTypes: params.limitedTypes === undefined ? [] : requireTypes(params.limitedTypes),
    };
    return types !== null && types.length === 0 ? null : claim;
  }

  /** A lease of at least a millisecond: a zero lease would be hung before it was handed out. */
  leaseMs(leaseMs: unknown): number {
    return requireInt('leaseMs', leaseMs, 1);
  }

  failedAttempts(attempts: readonly FailedAttempt[]): CheckedFailedAttempt[] {
    if (!Array.isArray(attempts)) throw new InvalidArgumentError('fail takes an array of attempts');
    return attempts.map(({ ref, outcome }) => {
      const o = requireFailureOutcome(outcome);
      return {
        id: requireId(ref.id),
        token: this.token(ref.token),
        status: o.status,
        retryCount: o.retryCount,
        nextRunAt: o.nextRunAt,
        lastError: errorText(o.lastError),
      };
    });
  }

  /** A reclaim's parameters; null when it asks for none. */
  reclaim(params: ReclaimParams): CheckedReclaim | null {
    const limit = requireInt('limit', params.limit, 0);
    const maxRescues = requireInt('maxRescues', params.maxRescues, 0, MAX_INT);
    return limit === 0 ? null : { limit, maxRescues, deadError: rescueLimitMessage(maxRescues) };
  }

  /** An admin transition's due time: it is written, so within the stored range. */
  adminNow(now: unknown): Date {
    return requireStoredTime('now', now);
  }

  /** A kill or cancel reason as lastError holds it, or null. */
  reason(reason: unknown): string | null {
    const text = optionalReason(reason);
    return text === null ? null : errorText(text);
  }

  /** A time only compared with (a read's "now"), clamped into the stored range. */
  instant(what: string, value: unknown): Date {
    return requireInstant(what, value);
  }

  list(query: ListQuery): CheckedListQuery {
    const limit = requireInt('limit', query.limit ?? DEFAULT_LIST_LIMIT, 1, MAX_LIST_LIMIT);
    const statuses = query.status === undefined ? null : requireStatuses(query.status);
    const cursor =
      query.cursor === undefined || query.cursor === null ? null : decodeListCursor(query.cursor);
    return {
      limit,
      fetch: limit + 1,
      statuses,
      type: optionalText('type', query.type),
      bizKey: optionalText('bizKey', query.bizKey),
      after: cursor && { id: cursor.id, createdAt: requireInstant('cursor', cursor.createdAt) },
    };
  }

  healthProbe(params: HealthProbeParams): HealthProbeParams {
    return requireHealthProbeParams(params);
  }

  outcomeCounts(params: OutcomeCountParams): OutcomeCountParams {
    return requireOutcomeCountParams(params);
  }

  /** A purge's parameters; null when it can delete nothing. Only finished commands are purged. */
  purge(params: PurgeParams): CheckedPurge | null {
    const statuses = requireStatuses(params.statuses ?? ['SUCCESS', 'CANCELLED']);
    for (const s of statuses) {
      if (!FINISHED_STATUSES.includes(s)) {
        throw new InvalidArgumentError(`purge deletes only finished commands, not ${s} ones`);
      }
    }
    const limit = requireInt('limit', params.limit, 0);
    const olderThan = requireInstant('olderThan', params.olderThan);
    if (limit === 0 || statuses.length === 0) return null;
    return { statuses: [...new Set(statuses)] as CheckedPurge['statuses'], limit, olderThan };
  }

  private text(what: 'type' | 'bizKey' | 'owner', value: unknown): string | null {
    const text = optionalText(what, value);
    if (text !== null) this.fits(what, text, this.widths[what]);
    return text;
  }

  private fits(what: string, text: string, maxChars: number | undefined): void {
    // Column widths count characters (code points), not UTF-16 units.
    if (maxChars !== undefined && [...text].length > maxChars) {
      throw new InvalidArgumentError(`${what} is longer than ${maxChars} characters`);
    }
  }
}

/** Whether `text` parses as JSON: a store must never keep a result its reads could not parse. */
function isJsonText(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/** A type claimed within two kinds of limit at once (a type, key or key-rate limit) is refused. */
function refuseTwoLimits(claim: {
  readonly limitedTypes: readonly string[];
  readonly keyedTypes: readonly string[];
  readonly keyRatedTypes: readonly string[];
}): void {
  const kinds = [claim.limitedTypes, claim.keyedTypes, claim.keyRatedTypes].map((l) => new Set(l));
  const twice = [...claim.keyedTypes, ...claim.keyRatedTypes].find(
    (t) => kinds.filter((kind) => kind.has(t)).length > 1,
  );
  if (twice !== undefined) {
    throw new InvalidArgumentError(
      `type "${twice}" can be claimed within one of a type, key or key rate limit`,
    );
  }
}
