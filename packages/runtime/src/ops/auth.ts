import { InvalidArgumentError } from '@asynccmd/core';
import { createHash, timingSafeEqual } from 'node:crypto';
import { isIP } from 'node:net';

export const MIN_TOKEN_LENGTH = 16;

/**
 * How the admin API authenticates: a bearer token, or — asked for by name — nothing. A token read
 * from an unset environment variable must not open the API by accident.
 */
export type AdminAuthOptions =
  | {
      /**
       * Bearer token guarding listing, stats, metrics and every mutation (at least 16 characters);
       * clients send `Authorization: Bearer <token>`.
       */
      readonly token: string;
      readonly auth?: undefined;
    }
  | {
      /**
       * No authentication: the handler is mounted behind the application's own, or serves only
       * this machine (startAdminServer then listens on loopback only, and only loopback Host
       * names or `allowedHosts` are served).
       */
      readonly auth: 'none';
      readonly token?: undefined;
    };

/** The token to require, or null for `auth: 'none'`; anything else is an INVALID_ARGUMENT. */
export function resolveAdminAuth(options: {
  readonly token?: unknown;
  readonly auth?: unknown;
}): string | null {
  const { token, auth } = options;
  if (auth === 'none') {
    if (token !== undefined) {
      throw new InvalidArgumentError("pass either `token` or `auth: 'none'`, not both");
    }
    return null;
  }
  if (auth !== undefined) {
    throw new InvalidArgumentError(`auth must be 'none' when given, not ${JSON.stringify(String(auth))}`);
  }
  if (token === undefined || token === null) {
    throw new InvalidArgumentError(
      "the admin API needs a `token` (is the variable it is read from unset?), or `auth: 'none'` to " +
        'run without authentication',
    );
  }
  return validateToken(token);
}

/** A bearer token worth the name: long enough not to be guessed, and sendable in a header. */
export function validateToken(token: unknown): string {
  if (typeof token !== 'string') throw new InvalidArgumentError('the admin token must be a string');
  if (token.length < MIN_TOKEN_LENGTH) {
    throw new InvalidArgumentError(`the admin token must be at least ${MIN_TOKEN_LENGTH} characters long`);
  }
  if (!/^[\x21-\x7e]+$/.test(token)) {
    throw new InvalidArgumentError('the admin token must be printable ASCII without spaces');
  }
  return token;
}

/** Compares `Authorization: Bearer <token>` in constant time (hashing first evens out the lengths). */
export function bearerMatches(authorization: string | undefined, token: string): boolean {
  const match = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(authorization ?? '');
  if (match === null) return false;
  const digest = (s: string) => createHash('sha256').update(s, 'utf8').digest();
  return timingSafeEqual(digest(match[1] ?? ''), digest(token));
}

/**
 * Whether only this machine can reach `host`. Anything unsure ('0.0.0.0', '::', a host name other
 * than localhost) counts as reachable from the network.
 */
export function isLoopbackHost(host: string): boolean {
  const h = host
    .trim()
    .toLowerCase()
    .replace(/^\[(.*)\]$/, '$1');
  if (h === 'localhost') return true;
  if (isIP(h) === 4) return h.startsWith('127.');
  if (isIP(h) === 6) return h === '::1' || /^::ffff:127\./.test(h);
  return false;
}
