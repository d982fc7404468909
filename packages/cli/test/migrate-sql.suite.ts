import type { CommandStore } from '@asynccmd/core';
import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { submit } from '../../runtime/test/ops/support.js';
import { cli } from './run.js';

/** A database namespace nothing has migrated, the shell tool a DBA would apply SQL with, and a store on it. */
export interface BlankDatabase {
  /** The `asynccmd` arguments that reach it: `--db URL` and `--schema` where needed. */
  readonly cliArgs: readonly string[];
  /** The database's own shell, reading a script on stdin and stopping at the first error. */
  readonly shell: { readonly command: string; readonly args: readonly string[] };
  /** A table of the namespace as SQL names it (schema-qualified on PostgreSQL). */
  qualify(table: string): string;
  /** A store on the namespace (opened after the script is applied). */
  openStore(): Promise<CommandStore>;
  dispose(): Promise<void>;
}

/** `asynccmd migrate --print-sql`, applied by hand with the database's shell, on one real database. */
export function describeMigrationSql(name: string, open: () => Promise<BlankDatabase>): void {
  describe(`asynccmd migrate --print-sql on ${name}`, () => {
    let db: BlankDatabase;
    const stores: CommandStore[] = [];
    const run = (...args: string[]) => cli([...db.cliArgs, ...args]);

    beforeAll(async () => {
      db = await open();
    });
    afterAll(async () => {
      for (const s of stores) await s.close().catch(() => undefined);
      await db?.dispose();
    });

    it('prints DDL that, applied with the database shell, gives a schema the store accepts', async () => {
      const printed = await run('migrate', '--print-sql');
      expect(printed).toMatchObject({ code: 0, err: '' });
      expect(printed.out).toMatch(
        /^-- asynccmd migrate --print-sql: the \w+ DDL of migration version\(s\) 1, 2, /,
      );
      // The dry run applied nothing: the same script again.
      expect((await run('migrate', '--dry-run')).out).toBe(printed.out);

      const applied = spawnSync(db.shell.command, [...db.shell.args], {
        input: printed.out,
        encoding: 'utf8',
      });
      expect(applied.stderr).toBe('');
      expect(applied.status).toBe(0);

      expect((await run('migrate', '--print-sql')).out).toMatch(
        /command table is up to date; no migration to apply/,
      );
      const json = JSON.parse((await run('migrate', '--print-sql', '--json')).out) as { versions: unknown[] };
      expect(json.versions).toEqual([]);
      expect(await run('migrate')).toMatchObject({ code: 0 });

      const store = await db.openStore();
      stores.push(store);
      const id = await submit(store, 'sql.by-hand');
      const claimed = await store.claimDue({
        types: ['sql.by-hand'],
        limit: 10,
        now: new Date(Date.now() + 60_000),
        token: randomUUID(),
        leaseMs: 30_000,
      });
      expect(claimed.map((c) => c.id)).toEqual([id]);
      await store.complete([{ id, token: claimed[0]?.claimToken ?? '' }]);
      expect((await store.get(id))?.status).toBe('SUCCESS');
      // Version 7's schedules table is there too.
      await store.schedules?.declare(
        [{ name: 'by-hand', type: 'sql.by-hand', cron: '* * * * *', timezone: null }],
        new Date(),
      );
      expect((await store.schedules?.list())?.map((s) => s.name)).toEqual(['by-hand']);
    });

    it('on a database that lacks only the latest version, prints that version alone', async () => {
      const shell = (input: string) =>
        spawnSync(db.shell.command, [...db.shell.args], { input, encoding: 'utf8' });
      // Undo version 9 by hand: its record and its column.
      const undo = shell(
        `DELETE FROM ${db.qualify('async_command_migrations')} WHERE version = 9;\n` +
          `ALTER TABLE ${db.qualify('async_command_schedules')} DROP COLUMN run_time_settings;\n`,
      );
      expect(undo.stderr).toBe('');
      const printed = await run('migrate', '--print-sql', '--json');
      const script = JSON.parse(printed.out) as { versions: { version: number }[] };
      expect(script.versions.map((v) => v.version)).toEqual([9]);
      const applied = shell((await run('migrate', '--print-sql')).out);
      expect(applied.stderr).toBe('');
      expect(applied.status).toBe(0);
      expect((await run('migrate', '--print-sql')).out).toMatch(/up to date/);
      const store = await db.openStore();
      stores.push(store);
      const settings = { payloadJson: '{}', catchUp: 'none', maxRetry: null } as const;
      const def = { name: 'after-9', type: 'sql.by-hand', cron: '* * * * *', timezone: null };
      expect((await store.schedules?.add(def, settings, new Date()))?.runTime).toEqual(settings);
    });

    it('--all prints every version of a migrated database; --all alone is a usage error', async () => {
      const all = await run('migrate', '--print-sql', '--all', '--json');
      expect(all.code).toBe(0);
      const script = JSON.parse(all.out) as { versions: { version: number; statements: string[] }[] };
      expect(script.versions.map((v) => v.version).slice(0, 2)).toEqual([1, 2]);
      expect(script.versions.every((v) => v.statements.length > 0)).toBe(true);
      const usage = await run('migrate', '--all');
      expect(usage.code).toBe(2);
      expect(usage.err).toContain('--all goes with --print-sql');
    });
  });
}
