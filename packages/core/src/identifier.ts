import * as E from 'fp-ts/lib/Either.js';
import { InvalidIdentifierError } from './errors.js';

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,47}$/;

/**
 * Table names, schema names and prefixes are the only text that adapters splice into SQL; they
 * must pass this first. 48 characters leaves room for suffixed index names within every dialect's
 * 63/64-character limit.
 */
export function validateIdentifier(what: string, input: unknown): E.Either<InvalidIdentifierError, string> {
  return typeof input === 'string' && IDENTIFIER.test(input)
    ? E.right(input)
    : E.left(new InvalidIdentifierError(what, input));
}
