import { createHash } from 'node:crypto';
import * as E from 'fp-ts/lib/Either.js';
import { InvalidIdentifierError } from '@asynccmd/core';
import { validateIdentifier } from '@asynccmd/core/store-kit';

/**
 * The only text this adapter splices into SQL: a schema and a table name that passed core
 * `validateIdentifier` (letters, digits, _), then double-quoted so they keep their case. Every value
 * travels as a bound parameter.
 */
export interface TableNames {
  /** Unquoted, as given: for catalog lookups by bound parameter. */
  readonly schemaName: string;
  readonly tableName: string;
  /** Quoted and qualified, ready for SQL text. */
  readonly schema: string;
  readonly table: string;
  /**
   * Finished commands the completing statement moved out of `table` (migration 21): the hot table
   * keeps what claims need, and every read of a command looks in both.
   */
  readonly history: string;
  /** The history's partition for rows no other partition covers (migration 25). */
  readonly historyDefault: string;
  /** The history before migration 25, kept as a table of its own that every read also looks in. */
  readonly historyV1: string;
  readonly migrations: string;
  /** The per-type limits of RUNNING commands (migration 10). */
  readonly typeLimits: string;
  /** The types paused for every instance (migration 13). */
  readonly pausedTypes: string;
  /** Which command waits for which (migration 18). */
  readonly dependencies: string;
  /** The steps of each workflow (migration 18). */
  readonly workflowSteps: string;
  /** An index name next to the table (suffixes stay ≤ 15 characters: 48 + 15 fits Postgres's 63). */
  index(suffix: string): string;
  /** A function next to the table, quoted and qualified (suffixes ≤ 15 characters, as index names). */
  fn(suffix: string): string;
  /** Key of the advisory lock that serialises migrations of this table. */
  readonly lockKey: string;
  /** LISTEN/NOTIFY channel for this table's wake-ups (≤ 63 characters, so never truncated). */
  readonly channel: string;
}

const MAX_NAME = 63;

/** Validates the names; throws core's InvalidIdentifierError for a hostile or malformed one. */
export function tableNames(schema: unknown, table: unknown): TableNames {
  const s = unwrap(validateIdentifier('schema', schema));
  if (s.startsWith('pg_')) throw new ReservedSchemaError(s);
  const t = unwrap(validateIdentifier('table', table));
  const q = (name: string): string => `"${name}"`;
  const plain = `asynccmd_${s}_${t}`;
  return {
    schemaName: s,
    tableName: t,
    schema: q(s),
    table: `${q(s)}.${q(t)}`,
    history: `${q(s)}.${q(`${t}_history`)}`,
    historyDefault: `${q(s)}.${q(`${t}_h_default`)}`,
    historyV1: `${q(s)}.${q(`${t}_history_v1`)}`,
    migrations: `${q(s)}.${q(`${t}_migrations`)}`,
    typeLimits: `${q(s)}.${q(`${t}_type_limits`)}`,
    pausedTypes: `${q(s)}.${q(`${t}_paused_types`)}`,
    dependencies: `${q(s)}.${q(`${t}_dependencies`)}`,
    workflowSteps: `${q(s)}.${q(`${t}_workflow_steps`)}`,
    index: (suffix) => q(`${t}_${suffix}`),
    fn: (suffix) => `${q(s)}.${q(`${t}_${suffix}`)}`,
    lockKey: `${s}.${t}`,
    channel:
      plain.length <= MAX_NAME
        ? plain
        : `asynccmd_${createHash('sha256').update(`${s}.${t}`).digest('hex').slice(0, 40)}`,
  };
}

/** PostgreSQL keeps schema names starting with pg_ for itself. */
class ReservedSchemaError extends InvalidIdentifierError {
  constructor(input: string) {
    super('schema', input);
    this.message = `schema ${JSON.stringify(input)} is reserved: PostgreSQL keeps names starting with pg_ for itself`;
  }
}

function unwrap<L, R>(e: E.Either<L, R>): R {
  if (E.isLeft(e)) throw e.left;
  return e.right;
}
