import { isAsyncCommandError, type CommandStore } from '@asynccmd/core';
import type { Command } from 'commander';
import { CliFailure, databaseFailure, EXIT_OK, EXIT_USAGE, type FailureContext } from './failures.js';
import { openStore, redactUrl } from './open-store.js';

/** Where the CLI writes, and the environment it reads (ASYNCCMD_DB). */
export interface CliIo {
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** Ends the process at once: `asynccmd worker` on a second SIGTERM. */
  readonly exit?: (code: number) => void;
}

interface GlobalOptions {
  readonly db?: string;
  readonly table?: string;
  readonly schema?: string;
  readonly pooler?: string;
  readonly listenDb?: string;
}

/** What every subcommand's action uses: output, the store the global options name, the exit code. */
export interface CliContext {
  readonly io: CliIo;
  readonly env: Readonly<Record<string, string | undefined>>;
  /** A line on stdout. */
  readonly out: (text: string) => void;
  /** A value as indented JSON on stdout. */
  readonly json: (value: unknown) => void;
  /** Opens the store the global options name, checks it answers, runs `fn`, closes it. */
  readonly withStore: (
    cmd: Command,
    fn: (store: CommandStore) => Promise<void>,
    create?: boolean,
    poolSize?: number,
  ) => Promise<void>;
  /** What the run exits with when nothing throws (an action sets it for a partial failure). */
  exitCode: number;
}

export function createCliContext(io: CliIo): CliContext {
  const env = io.env ?? {};
  const out = (text: string) => io.stdout(text.endsWith('\n') ? text : `${text}\n`);
  const json = (value: unknown) => out(JSON.stringify(value, null, 2));
  const withStore = async (
    cmd: Command,
    fn: (store: CommandStore) => Promise<void>,
    create = false,
    poolSize?: number,
  ): Promise<void> => {
    const g = cmd.optsWithGlobals<GlobalOptions>();
    const url = g.db ?? env['ASYNCCMD_DB'];
    if (url === undefined || url.trim() === '') {
      throw new CliFailure('no database: pass --db URL or set ASYNCCMD_DB', EXIT_USAGE);
    }
    const context: FailureContext = {
      table: [g.schema, g.table ?? 'async_command'].filter((part) => part !== undefined).join('.'),
    };
    // Our own errors keep their message (and exit code); a driver's is put in the CLI's words.
    const explained = (prefix: string) => (e: unknown) => {
      throw isAsyncCommandError(e) || e instanceof CliFailure ? e : databaseFailure(e, context, prefix);
    };
    const unreachable = explained(`cannot reach the database at ${redactUrl(url)}: `);
    const store = await openStore({
      url: url.trim(),
      ...(g.table !== undefined ? { table: g.table } : {}),
      ...(g.schema !== undefined ? { schema: g.schema } : {}),
      mustExist: !create,
      ...(poolSize !== undefined ? { poolSize } : {}),
      // The variables are for PostgreSQL URLs only: set for one database, they must not break a
      // command against another; the options are refused where they do not apply.
      ...optional('pooler', g.pooler ?? (postgresUrl(url) ? env['ASYNCCMD_PG_POOLER'] : undefined)),
      ...optional('listenUrl', g.listenDb ?? (postgresUrl(url) ? env['ASYNCCMD_PG_LISTEN_DB'] : undefined)),
    }).catch(unreachable);
    try {
      await store.ping().catch(unreachable);
      await fn(store).catch(explained(''));
    } finally {
      await store.close().catch(() => undefined);
    }
  };
  return { io, env, out, json, withStore, exitCode: EXIT_OK };
}

function postgresUrl(url: string): boolean {
  return /^\s*postgres(ql)?:/i.test(url);
}

/** `{ [key]: value }` for a value given and not blank, else nothing (an empty variable is unset). */
function optional<K extends string>(key: K, value: string | undefined): { [P in K]?: string } {
  return value === undefined || value.trim() === '' ? {} : ({ [key]: value.trim() } as { [P in K]?: string });
}
