import { InvalidArgumentError } from '@asynccmd/core';
import { createHash, timingSafeEqual } from 'node:crypto';
import { isIP } from 'node:net';

export const MIN_TOKEN_LENGTH = 16;

/** A bearer token worth the name: long enough not to be guessed, and sendable in a header. */
export function validateToken(token: string): string {
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
