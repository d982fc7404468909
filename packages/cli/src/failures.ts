/**
 * Exit codes: 0 done; 1 the operation or the database failed (unknown id, illegal transition,
 * database unreachable, table or SQLite file missing); 2 bad usage (unknown option, malformed
 * value, missing --db).
 */
export const EXIT_OK = 0;
export const EXIT_FAILED = 1;
export const EXIT_USAGE = 2;

/** A failure the CLI explains in one line of its own and exits with. */
export class CliFailure extends Error {
  constructor(
    message: string,
    readonly exitCode: number,
  ) {
    super(message);
    this.name = 'CliFailure';
  }
}

/** What the command needs to name the table it looked for. */
export interface FailureContext {
  /** The command table as the operator named it (schema-qualified on PostgreSQL). */
  readonly table: string;
}

/**
 * Driver error codes (PostgreSQL SQLSTATE, mysql2 and Node error codes, SQLite result codes)
 * and what the CLI says about them. Only these sentences are printed, never the driver's text:
 * it may quote credentials, hosts or SQL.
 */
const BY_CODE: Readonly<Record<string, string>> = {
  ECONNREFUSED: 'the connection was refused (is the server running, on that host and port?)',
  ENOTFOUND: 'the host name could not be resolved',
  EAI_AGAIN: 'the host name could not be resolved',
  ETIMEDOUT: 'the connection timed out',
  EHOSTUNREACH: 'the host cannot be reached',
  ENETUNREACH: 'the network cannot be reached',
  ECONNRESET: 'the server closed the connection',
  PROTOCOL_CONNECTION_LOST: 'the server closed the connection',
  '28P01': 'the server refused the user name or password',
  '28000': 'the server refused the user name or password',
  ER_ACCESS_DENIED_ERROR: 'the server refused the user name or password',
  ER_DBACCESS_DENIED_ERROR: 'the user may not use the database named in the URL',
  '3D000': 'the database named in the URL does not exist',
  ER_BAD_DB_ERROR: 'the database named in the URL does not exist',
  '42501': 'the user lacks a privilege this operation needs on the command table',
  ER_TABLEACCESS_DENIED_ERROR: 'the user lacks a privilege this operation needs on the command table',
  '53300': 'the server has no connection slots free',
  ER_CON_COUNT_ERROR: 'the server has no connection slots free',
  '57P03': 'the server is starting up or shutting down',
  SQLITE_BUSY: 'the SQLite database is locked by another process',
  SQLITE_NOTADB: 'the file is not a SQLite database',
  SQLITE_CANTOPEN: 'the SQLite file cannot be opened',
  SQLITE_READONLY: 'the SQLite file is read-only',
  SQLITE_CORRUPT: 'the SQLite file is damaged',
};

/** Codes (and, for SQLite, messages) meaning the command table is not there. */
const MISSING_TABLE_CODES = new Set(['42P01', '3F000', 'ER_NO_SUCH_TABLE']);

/** A driver error as a one-line CliFailure (exit 1), in the CLI's own words. */
export function databaseFailure(error: unknown, context: FailureContext, prefix = ''): CliFailure {
  const code = errorCode(error);
  if (isMissingTable(error, code)) {
    return new CliFailure(
      `the command table ${context.table} does not exist in this database: ` +
        'run "asynccmd migrate" (with the same --db, --table and --schema) to create it',
      EXIT_FAILED,
    );
  }
  if (isRefusedStartupOptions(error, code)) {
    return new CliFailure(
      `${prefix}the server refused the connection's start-up settings, as a transaction pooler ` +
        '(PgBouncer) does: pass --pooler transaction',
      EXIT_FAILED,
    );
  }
  const known = code === undefined ? undefined : BY_CODE[code];
  const sentence =
    known ??
    (code !== undefined && /^[A-Z0-9_]{2,40}$/.test(code)
      ? `the database failed the operation (error code ${code})`
      : 'the database failed the operation');
  return new CliFailure(`${prefix}${sentence}`, EXIT_FAILED);
}

function errorCode(error: unknown): string | undefined {
  const e = error as { code?: unknown; errors?: unknown } | null;
  if (typeof e?.code === 'string') return e.code;
  // Connecting to a name with several addresses fails with one error per address.
  return Array.isArray(e?.errors) ? errorCode(e.errors[0]) : undefined;
}

/** PgBouncer answers a start-up packet with `options` by a protocol violation naming the parameter. */
function isRefusedStartupOptions(error: unknown, code: string | undefined): boolean {
  return code === '08P01' && /unsupported startup parameter/i.test((error as Error).message);
}

function isMissingTable(error: unknown, code: string | undefined): boolean {
  if (code !== undefined && MISSING_TABLE_CODES.has(code)) return true;
  // better-sqlite3 reports a missing table as the generic SQLITE_ERROR; only its message tells.
  return code === 'SQLITE_ERROR' && /^no such table\b/.test((error as Error).message);
}
