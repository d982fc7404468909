import { createSqliteStore } from '@asynccmd/adapter-sqlite';
import {
  decideFailure,
  immediateBackoff,
  type ClaimedCommand,
  type CommandHeaders,
  type CommandId,
  type CommandStore,
} from '@asynccmd/core';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * Test helpers that drive a REAL store through its port: commands are created, claimed and failed
 * exactly as the runtime would, so the ops code reads real rows.
 */

export interface TempSqlite {
  readonly store: CommandStore;
  readonly file: string;
  readonly url: string;
  dispose(): Promise<void>;
}

/** A migrated SQLite database in a fresh temporary directory (one per test file or test). */
export async function openTempSqlite(): Promise<TempSqlite> {
  const dir = mkdtempSync(join(tmpdir(), 'asynccmd-ops-'));
  const file = join(dir, 'commands.db');
  const store = createSqliteStore({ filename: file });
  await store.migrate();
  return {
    store,
    file,
    url: `sqlite:${file}`,
    dispose: async () => {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export interface SubmitOptions {
  readonly bizKey?: string;
  readonly maxRetry?: number;
  readonly runAt?: Date;
  readonly headers?: CommandHeaders;
  readonly payload?: unknown;
}

export async function submit(
  store: CommandStore,
  type: string,
  options: SubmitOptions = {},
): Promise<CommandId> {
  const [id] = await store.transaction((tx) =>
    store.insert(tx, [
      {
        type,
        payloadJson: JSON.stringify(options.payload ?? { n: 1 }),
        maxRetry: options.maxRetry ?? 3,
        bizKey: options.bizKey ?? null,
        runAt: options.runAt ?? null,
        headers: options.headers ?? {},
      },
    ]),
  );
  if (id === undefined) throw new Error('insert returned no id');
  return id;
}

/** An idempotent submit: holds the (type, bizKey) key while PENDING or RUNNING. */
export async function submitIdempotent(
  store: CommandStore,
  type: string,
  bizKey: string,
  maxRetry = 3,
): Promise<CommandId> {
  const result = await store.transaction((tx) =>
    store.insertIdempotent(tx, { type, bizKey, payloadJson: '{}', maxRetry }),
  );
  return result.id;
}

/** Claims one command by id, due in the future so a just-inserted command is always due. */
export async function claim(store: CommandStore, id: CommandId): Promise<ClaimedCommand> {
  const claimed = await store.claimById({
    id,
    now: new Date(Date.now() + 60_000),
    token: randomUUID(),
    leaseMs: 60_000,
  });
  if (claimed === null) throw new Error(`command ${id} could not be claimed`);
  return claimed;
}

export async function succeed(store: CommandStore, id: CommandId): Promise<ClaimedCommand> {
  const c = await claim(store, id);
  await store.complete([{ id: c.id, token: c.claimToken }]);
  return c;
}

/** A dead letter: a command with no retries left whose only attempt failed. */
export async function makeDead(
  store: CommandStore,
  type: string,
  error = 'downstream said no',
  bizKey?: string,
): Promise<CommandId> {
  const id =
    bizKey === undefined
      ? await submit(store, type, { maxRetry: 0 })
      : await submitIdempotent(store, type, bizKey, 0);
  return failLastAttempt(store, id, error);
}

/** Claims a command with no retries left and fails it: a dead letter. */
async function failLastAttempt(store: CommandStore, id: CommandId, error: string): Promise<CommandId> {
  const c = await claim(store, id);
  const written = await store.fail([
    {
      ref: { id: c.id, token: c.claimToken },
      outcome: decideFailure(c, new Error(error), new Date(), immediateBackoff),
    },
  ]);
  if (!written.includes(c.id)) throw new Error('fail() was fenced');
  return id;
}

/**
 * Waits (without asserting on time) until the database clock is past `d`, so a cutoff computed
 * from "now" is strictly after rows written at `d`.
 */
export async function untilDatabaseClockPasses(store: CommandStore, d: Date): Promise<void> {
  while ((await store.now()).getTime() <= d.getTime()) {
    await new Promise((r) => setTimeout(r, 2));
  }
}
