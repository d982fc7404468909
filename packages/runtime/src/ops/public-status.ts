import {
  InvalidArgumentError,
  isTerminalOperationState,
  operationState,
  parseCommandId,
  type CommandId,
  type CommandProgress,
  type CommandRecord,
  type CommandStatus,
  type OperationState,
} from '@asynccmd/core';
import { createHmac, timingSafeEqual } from 'node:crypto';
import * as E from 'fp-ts/lib/Either.js';
import { parseMountPath, requireCommandId } from './validation.js';

/**
 * The status resource anyone may read, addressed by an unguessable reference instead of the
 * sequential id: `<id>.<tag>`, where the tag is an HMAC of the id under a secret the application
 * configures. Whoever was handed the link can follow that one command; counting ids reaches
 * nothing, since a tag cannot be made without the secret.
 */

export const MIN_STATUS_SECRET_LENGTH = 32;

export interface PublicStatusOptions {
  /** At least 32 characters; the same on every instance that builds or serves the links. */
  readonly secret: string;
}

/** How the admin handler serves the public status resource. */
export interface PublicStatusHandlerOptions extends PublicStatusOptions {
  /**
   * Show the command's result (what its executor left with `ctx.setResult`) to anyone holding the
   * link. Default false: a result may hold what the API never meant to publish; turn it on only
   * when every type's results are fit for whoever is handed the link.
   */
  readonly result?: boolean;
}

export interface PublicStatusSettings {
  readonly secret: string;
  readonly showResult: boolean;
}

export interface PublicStatusLinkOptions extends PublicStatusOptions {
  /** Where the admin routes are mounted ('' or e.g. '/ops'). Default ''. */
  readonly basePath?: string;
}

/**
 * The command as anyone holding its link sees it: where it stands, never why it failed (error
 * text can name hosts, users and data), nor its id, business key, owner or payload; its result
 * only where the handler's `publicStatus.result` allows.
 */
export interface PublicCommandStatus {
  readonly reference: string;
  readonly type: string;
  readonly status: CommandStatus;
  /** accepted | processing | completed | follow_up_failed | cancelled */
  readonly operation: OperationState;
  /** Polling may stop (a follow_up_failed command may still be retried by a person). */
  readonly terminal: boolean;
  readonly attempts: { readonly failed: number; readonly maxRetry: number };
  /** What its executor last reported with `ctx.progress` (`done` of `total`); null when nothing. */
  readonly progress: CommandProgress | null;
  readonly nextRunAt: string;
  readonly createdAt: string;
  readonly updatedAt: string;
  readonly startedAt: string | null;
  readonly finishedAt: string | null;
  readonly links: { readonly self: string };
  /** With `publicStatus.result` only: the result once SUCCESS, null before and when none. */
  readonly result?: unknown;
}

// 128 bits of HMAC-SHA256: far beyond guessing, and a short link.
const TAG_BYTES = 16;
const REFERENCE = /^([0-9]{1,20})\.([A-Za-z0-9_-]{22})$/;

export function validateStatusSecret(options: unknown): string {
  const secret = (options as { secret?: unknown } | null)?.secret;
  if (typeof secret !== 'string' || secret.length < MIN_STATUS_SECRET_LENGTH) {
    throw new InvalidArgumentError(
      `publicStatus takes { secret }, a string of at least ${MIN_STATUS_SECRET_LENGTH} characters: ` +
        'the public status resource is addressed by a reference made with it',
    );
  }
  return secret;
}

/** The handler's `publicStatus` option, checked: a bad one is INVALID_ARGUMENT at construction. */
export function resolvePublicStatusOptions(options: unknown): PublicStatusSettings {
  const secret = validateStatusSecret(options);
  // Only an absent option means the default: null is as much a mistake as 'yes'.
  const result: unknown = (options as { result?: unknown }).result;
  if (result !== undefined && typeof result !== 'boolean') {
    throw new InvalidArgumentError('publicStatus.result must be true or false');
  }
  return { secret, showResult: result === true };
}

function tagOf(id: CommandId, secret: string): string {
  const mac = createHmac('sha256', secret).update(`asynccmd status ${id}`).digest();
  return mac.subarray(0, TAG_BYTES).toString('base64url');
}

/** The unguessable reference of a command: `<id>.<tag>`. */
export function publicStatusReference(id: string, options: PublicStatusOptions): string {
  const commandId = requireCommandId(id);
  return `${commandId}.${tagOf(commandId, validateStatusSecret(options))}`;
}

/**
 * The public status URI to return in `Location` with a 202 (`<basePath>/status/<reference>`);
 * the admin handler given the same secret serves it.
 */
export function publicStatusPath(id: string, options: PublicStatusLinkOptions): string {
  const base = parseMountPath('basePath', options.basePath ?? '');
  return `${base}/status/${publicStatusReference(id, options)}`;
}

/** The command a reference names, or null when it is not one made with this secret. */
export function resolvePublicStatusReference(reference: string, secret: string): CommandId | null {
  const match = REFERENCE.exec(reference);
  if (match === null) return null;
  const id = parseCommandId(match[1]);
  if (E.isLeft(id)) return null;
  // Compared as text, in constant time: only the one canonical spelling of the tag is accepted.
  const given = Buffer.from(match[2] ?? '', 'ascii');
  const expected = Buffer.from(tagOf(id.right, secret), 'ascii');
  return given.length === expected.length && timingSafeEqual(given, expected) ? id.right : null;
}

export function toPublicStatus(
  c: CommandRecord,
  reference: string,
  selfPath: string,
  showResult: boolean,
): PublicCommandStatus {
  const operation = operationState(c);
  const status: PublicCommandStatus = {
    reference,
    type: c.type,
    status: c.status,
    operation,
    terminal: isTerminalOperationState(operation),
    attempts: { failed: c.retryCount, maxRetry: c.maxRetry },
    progress: c.progress,
    nextRunAt: c.nextRunAt.toISOString(),
    createdAt: c.createdAt.toISOString(),
    updatedAt: c.updatedAt.toISOString(),
    startedAt: c.startedAt?.toISOString() ?? null,
    finishedAt: c.finishedAt?.toISOString() ?? null,
    links: { self: selfPath },
  };
  return showResult ? { ...status, result: c.result ?? null } : status;
}
