import { createSqliteStore } from '@asynccmd/adapter-sqlite';
import {
  decideFailure,
  immediateBackoff,
  type ClaimedCommand,
  type CommandHeaders,
  type CommandId,
  type CommandStore,
  type Logger,
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
  readonly owner?: string;
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
        owner: options.owner ?? null,
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

/** One step of a workflow made through the store port: what it waits for, by step name or `{ id }`. */
export interface StepSpec {
  readonly name: string;
  readonly type: string;
  readonly dependsOn?: readonly (
    | string
    | { readonly id: CommandId; readonly onFailure?: 'cancel' | 'continue' }
    | { readonly step: string; readonly onFailure?: 'cancel' | 'continue' }
  )[];
}

/**
 * A workflow written as the runtime's builder writes it (each step inserted, WAITING for what it
 * depends on, then recorded as `workflowId`), the steps in dependency order; their ids by name.
 */
export async function submitWorkflow(
  store: CommandStore,
  workflowId: string,
  steps: readonly StepSpec[],
): Promise<Record<string, CommandId>> {
  const deps = store.dependencies;
  if (deps === undefined) throw new Error('this store has no dependencies');
  const ids: Record<string, CommandId> = {};
  for (const s of steps) {
    const dependsOn = (s.dependsOn ?? []).map((d) =>
      typeof d === 'string'
        ? { id: ids[d]! }
        : 'step' in d
          ? { id: ids[d.step]!, ...(d.onFailure && { onFailure: d.onFailure }) }
          : d,
    );
    const command = { type: s.type, payloadJson: JSON.stringify({ step: s.name }), maxRetry: 0 };
    const [id] = await store.transaction((tx) =>
      dependsOn.length === 0
        ? store.insert(tx, [command])
        : deps.insertWaiting(tx, [{ ...command, dependsOn }]),
    );
    ids[s.name] = id!;
  }
  await store.transaction((tx) =>
    deps.recordWorkflow(
      tx,
      workflowId,
      steps.map((s) => ({ name: s.name, id: ids[s.name]! })),
    ),
  );
  return ids;
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
export async function failLastAttempt(store: CommandStore, id: CommandId, error: string): Promise<CommandId> {
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

export interface LogEntry {
  readonly level: 'debug' | 'info' | 'warn' | 'error';
  readonly obj: Record<string, unknown>;
  readonly msg: string;
}

/** A logger that keeps what it was told, for tests that read the log. */
export function recordingLogger(): { readonly logger: Logger; readonly entries: LogEntry[] } {
  const entries: LogEntry[] = [];
  const at =
    (level: LogEntry['level']) =>
    (obj: object, msg = ''): void => {
      entries.push({ level, obj: obj as Record<string, unknown>, msg });
    };
  return { logger: { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') }, entries };
}

const COUNTED_READS = new Set(['healthProbe', 'stats', 'now', 'ping']);

/**
 * The same real store, counting the calls of its health and stats reads; `gate`, while set, holds
 * every healthProbe until it resolves, so a test can have many requests wait on one probe.
 */
export function countingStore(store: CommandStore): {
  readonly store: CommandStore;
  readonly calls: Map<string, number>;
  gate: Promise<void> | null;
} {
  const calls = new Map<string, number>();
  const counted = {
    store: store,
    calls,
    gate: null as Promise<void> | null,
  };
  counted.store = new Proxy(store, {
    get(target, property) {
      const value: unknown = Reflect.get(target, property);
      if (typeof value !== 'function') return value;
      const method = value as (...a: unknown[]) => unknown;
      if (typeof property !== 'string' || !COUNTED_READS.has(property)) return method.bind(target);
      return async (...args: unknown[]) => {
        calls.set(property, (calls.get(property) ?? 0) + 1);
        if (property === 'healthProbe' && counted.gate !== null) await counted.gate;
        return method.apply(target, args);
      };
    },
  });
  return counted;
}

/** A workflow of two steps, `b` waiting for `a`, written as the client's builder writes one. */
export async function submitTwoStepWorkflow(
  store: CommandStore,
  id: string,
  type = 'wf.step',
): Promise<{ a: string; b: string }> {
  const ids = await submitWorkflow(store, id, [
    { name: 'a', type },
    { name: 'b', type, dependsOn: ['a'] },
  ]);
  return { a: ids.a!, b: ids.b! };
}
