import { afterAll, beforeAll } from 'vitest';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ClaimedCommand, CommandId, CommandStore, NewCommand } from '@asynccmd/core';
import type { StoreHarness, StoreHarnessFactory } from './harness.js';

/**
 * What every area of the suite receives: the harness of its own namespace (created before its
 * tests, disposed after) and helpers that keep tests of one area from seeing each other's rows —
 * each test works on command types no other test uses.
 */
export interface AreaContext<Tx = unknown> {
  readonly harness: () => StoreHarness<Tx>;
  readonly store: () => CommandStore<Tx>;
}

let sequence = 0;

/** A command type no other test uses (per process; namespaces separate processes). */
export function uniqueType(label = 'cmd'): string {
  sequence += 1;
  return `${label}.${sequence}.${Math.random().toString(36).slice(2, 8)}`;
}

/** Namespaces: short, valid identifiers, unique per run so parallel runs never collide. */
export function namespaceFor(adapter: string, area: string): string {
  const clean = adapter
    .toLowerCase()
    .replace(/[^a-z0-9]/g, '')
    .slice(0, 10);
  return `cf_${clean}_${area}_${process.pid.toString(36)}${Math.random().toString(36).slice(2, 6)}`;
}

export function useArea<Tx>(
  factory: StoreHarnessFactory<Tx>,
  adapter: string,
  area: string,
): AreaContext<Tx> {
  let harness: StoreHarness<Tx> | undefined;
  beforeAll(async () => {
    harness = await factory(namespaceFor(adapter, area));
  });
  afterAll(async () => {
    await harness?.dispose();
  });
  const current = (): StoreHarness<Tx> => {
    if (!harness) throw new Error(`the ${area} harness was not created`);
    return harness;
  };
  return { harness: current, store: () => current().store };
}

export function newCommand(type: string, over: Partial<NewCommand> = {}): NewCommand {
  return { type, payloadJson: JSON.stringify({ type }), maxRetry: 3, ...over };
}

/** Submits inside a transaction of the store's, as the runtime's client does. */
export function submit<Tx>(store: CommandStore<Tx>, commands: readonly NewCommand[]): Promise<CommandId[]> {
  return store.transaction((tx) => store.insert(tx, commands));
}

export async function submitOne<Tx>(store: CommandStore<Tx>, command: NewCommand): Promise<CommandId> {
  const [id] = await submit(store, [command]);
  if (id === undefined) throw new Error('insert returned no id');
  return id;
}

/** An application-clock instant comfortably after anything submitted "now". */
export function later(ms = 60_000): Date {
  return new Date(Date.now() + ms);
}

let tokens = 0;
export function freshToken(): string {
  tokens += 1;
  return `tok-${process.pid}-${tokens}-${Math.random().toString(36).slice(2, 10)}`;
}

export interface ClaimOptions {
  readonly limit?: number;
  readonly now?: Date;
  readonly leaseMs?: number;
  readonly token?: string;
  readonly instance?: string;
}

export function claim<Tx>(
  store: CommandStore<Tx>,
  types: string | readonly string[],
  options: ClaimOptions = {},
): Promise<ClaimedCommand[]> {
  return store.claimDue({
    types: typeof types === 'string' ? [types] : types,
    limit: options.limit ?? 100,
    now: options.now ?? later(),
    token: options.token ?? freshToken(),
    leaseMs: options.leaseMs ?? 60_000,
    ...(options.instance === undefined ? {} : { instance: options.instance }),
  });
}

/** Submits `n` commands of a fresh type (labelled `label`) and claims them all under one token. */
export async function submitAndClaim<Tx>(
  store: CommandStore<Tx>,
  n: number,
  label: string,
): Promise<{ type: string; rows: ClaimedCommand[] }> {
  const type = uniqueType(label);
  await submit(
    store,
    Array.from({ length: n }, () => newCommand(type)),
  );
  const rows = await claim(store, type, { limit: n });
  if (rows.length !== n) throw new Error(`expected to claim ${n} ${type}, got ${rows.length}`);
  return { type, rows };
}

/** Claims exactly one command of `type` (submitted beforehand), failing loudly otherwise. */
export async function claimOne<Tx>(
  store: CommandStore<Tx>,
  type: string,
  options: ClaimOptions = {},
): Promise<ClaimedCommand> {
  const claimed = await claim(store, type, { ...options, limit: 1 });
  if (claimed.length !== 1 || !claimed[0])
    throw new Error(`expected to claim one ${type}, got ${claimed.length}`);
  return claimed[0];
}

/** Waits (polling the database clock, never asserting on time) until the database clock is past `t`. */
export async function untilDatabaseClockPasses<Tx>(store: CommandStore<Tx>, t: Date): Promise<void> {
  for (let i = 0; i < 5000; i++) {
    if ((await store.now()).getTime() > t.getTime()) return;
    await sleep(2);
  }
  throw new Error(`the database clock never passed ${t.toISOString()}`);
}

/** The code of an asynccmd error (compared by code, never by class, across package copies). */
export function codeOf(e: unknown): string | undefined {
  const code = (e as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

export async function rejectionCode(promise: Promise<unknown>): Promise<string | undefined> {
  try {
    await promise;
  } catch (e) {
    return codeOf(e) ?? `not an asynccmd error: ${String(e)}`;
  }
  return 'resolved';
}

/** An answer and whether it came while a transaction's function was still running. */
export interface AnswerDuringTransaction<T> {
  readonly answer: T;
  readonly beforeCommit: boolean;
}

/**
 * A question to another instance while a transaction is open, whose answer is awaited inside the
 * transaction for at most `ms`. A store on one connection (PGlite) answers only once the
 * transaction is over, whatever its isolation: awaiting that answer inside would never end. Call
 * `over()` as the transaction's function ends: an answer counts as `beforeCommit` when it came
 * earlier (one that came between then and the commit counts as after, which proves less).
 */
export class DuringTransaction<T> {
  #over = false;
  #answer: Promise<AnswerDuringTransaction<T>> | null = null;

  constructor(private readonly ms = 300) {}

  async ask(question: () => Promise<T>): Promise<void> {
    const answer = question().then((value) => ({ answer: value, beforeCommit: !this.#over }));
    this.#answer = answer;
    await Promise.race([answer, sleep(this.ms)]);
  }

  over(): void {
    this.#over = true;
  }

  get answer(): Promise<AnswerDuringTransaction<T>> {
    if (this.#answer === null) throw new Error('nothing was asked during the transaction');
    return this.#answer;
  }
}
