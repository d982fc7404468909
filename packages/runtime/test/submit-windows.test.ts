import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createAsyncCommands, defineExecutor, purgeFinished, type SubmitWindow } from '../src/index.js';
import { claim, openTempSqlite, succeed, type TempSqlite } from './ops/support.js';

let db: TempSqlite;
beforeEach(async () => {
  db = await openTempSqlite();
});
afterEach(async () => {
  await db.dispose();
});

interface Edit {
  readonly doc: string;
  readonly n: number;
}

const sync = defineExecutor<'doc.sync', Edit>({ type: 'doc.sync', execute: () => undefined });

/** A whole second an hour ago: commands due a few seconds after it are due for a claim now. */
const BASE = new Date(Math.floor(Date.now() / 1000) * 1000 - 3_600_000);
const at = (ms: number): string => new Date(BASE.getTime() + ms).toISOString();

/** A runtime (never started: the test claims by hand) whose clock stands at `at` until moved. */
function runtimeWith(window: SubmitWindow, extra: { retention?: { olderThanMs: number } } = {}) {
  const clock = { at: BASE };
  const runtime = createAsyncCommands({
    store: db.store,
    executors: [sync],
    clock: { now: () => clock.at },
    submitWindows: { 'doc.sync': window },
    ...extra,
  });
  const submit = (n: number, options?: { key?: string }) =>
    runtime.client.transaction((tx) =>
      runtime.client.submitCoalesced(tx, 'doc.sync', { doc: 'a', n }, { key: 'doc-a', ...options }),
    );
  return { runtime, clock, submit };
}

/** 20 concurrent coalesced submits of the key 'race', each in its transaction; the order they committed in. */
async function race(runtime: ReturnType<typeof runtimeWith>['runtime']) {
  const order: number[] = [];
  const results = await Promise.all(
    Array.from({ length: 20 }, (_, n) =>
      runtime.client.transaction(async (tx) => {
        const r = await runtime.client.submitCoalesced(tx, 'doc.sync', { doc: 'a', n }, { key: 'race' });
        // A coalesced submit holds the key's row (the database's write lock here) to COMMIT: this
        // is the write order.
        order.push(n);
        return r;
      }),
    ),
  );
  return { results, order };
}

async function rows() {
  return (await db.store.list({ type: 'doc.sync' })).items;
}

function refusal(build: () => unknown): { code: unknown; message: string } | null {
  try {
    build();
    return null;
  } catch (e) {
    return { code: (e as { code?: unknown }).code, message: (e as Error).message };
  }
}

describe('submit windows (debounce and throttle), on SQLite', () => {
  it('debounce: one command per key, the last payload, due debounceMs after the last submit', async () => {
    const { clock, submit } = runtimeWith({ debounceMs: 5_000 });
    const first = await submit(1);
    expect(first).toMatchObject({ outcome: 'created', duplicate: false, replaced: false });
    clock.at = new Date(clock.at.getTime() + 1_000);
    expect(await submit(2)).toEqual({ id: first.id, duplicate: true, replaced: true, outcome: 'debounced' });
    clock.at = new Date(clock.at.getTime() + 1_000);
    expect(await submit(3)).toMatchObject({ id: first.id, outcome: 'debounced' });
    const [row, ...more] = await rows();
    expect(more).toEqual([]);
    expect(row).toMatchObject({ status: 'PENDING', payload: { doc: 'a', n: 3 }, bizKey: 'doc-a' });
    expect(row?.nextRunAt.toISOString()).toBe(at(7_000));
  });

  it('throttle drop: later submits in the window are dropped, the start stays throttleMs after the first', async () => {
    const { clock, submit } = runtimeWith({ throttleMs: 10_000 });
    const first = await submit(1);
    expect(first.outcome).toBe('created');
    clock.at = new Date(clock.at.getTime() + 4_000);
    expect(await submit(2)).toEqual({ id: first.id, duplicate: true, replaced: false, outcome: 'throttled' });
    const [row, ...more] = await rows();
    expect(more).toEqual([]);
    expect(row?.payload).toEqual({ doc: 'a', n: 1 });
    expect(row?.nextRunAt.toISOString()).toBe(at(10_000));
  });

  it('throttle merge: later submits give their payload, the start does not move', async () => {
    const { clock, submit } = runtimeWith({ throttleMs: 10_000, later: 'merge' });
    const first = await submit(1);
    clock.at = new Date(clock.at.getTime() + 4_000);
    expect(await submit(2)).toEqual({ id: first.id, duplicate: true, replaced: true, outcome: 'throttled' });
    const [row] = await rows();
    expect(row?.payload).toEqual({ doc: 'a', n: 2 });
    expect(row?.nextRunAt.toISOString()).toBe(at(10_000));
  });

  it('a RUNNING command is never changed: debounce and merge say running, drop says throttled', async () => {
    for (const [window, outcome] of [
      [{ debounceMs: 1_000 }, 'running'],
      [{ throttleMs: 1_000, later: 'merge' }, 'running'],
      [{ throttleMs: 1_000 }, 'throttled'],
    ] as const) {
      const { submit } = runtimeWith(window);
      const key = `k-${outcome}-${'later' in window ? window.later : 'none'}`;
      const first = await submit(1, { key });
      await claim(db.store, first.id);
      expect(await submit(2, { key }), JSON.stringify(window)).toMatchObject({ id: first.id, outcome });
      expect((await db.store.get(first.id))?.payload).toEqual({ doc: 'a', n: 1 });
    }
  });

  it('a finished command no longer holds the key: the next submit opens a new window', async () => {
    const { submit } = runtimeWith({ debounceMs: 1_000 });
    const first = await submit(1);
    const claimed = await claim(db.store, first.id);
    await db.store.complete([{ id: claimed.id, token: claimed.claimToken }]);
    const next = await submit(2);
    expect(next.outcome).toBe('created');
    expect(next.id).not.toBe(first.id);
  });

  it('20 concurrent submits leave exactly one command, with the payload of the last to write', async () => {
    const { runtime } = runtimeWith({ debounceMs: 60_000 });
    const { results, order } = await race(runtime);
    expect(results.filter((r) => r.outcome === 'created')).toHaveLength(1);
    expect(results.filter((r) => r.outcome === 'debounced')).toHaveLength(19);
    const [row, ...more] = await rows();
    expect(more).toEqual([]);
    expect(row?.payload).toEqual({ doc: 'a', n: order.at(-1) });
  });

  it('a window key function gives the key; one that throws or answers a non-string is refused, nothing written', async () => {
    const { runtime } = runtimeWith({ debounceMs: 1_000, key: (p: Edit) => `doc-${p.doc}` });
    const keyed = await runtime.client.transaction((tx) =>
      runtime.client.submitCoalesced(tx, 'doc.sync', { doc: 'b', n: 1 }),
    );
    expect((await db.store.get(keyed.id))?.bizKey).toBe('doc-b');
    for (const key of [
      (): string => {
        throw new Error('no key');
      },
      () => 42 as unknown as string,
      () => '',
    ]) {
      const bad = createAsyncCommands({
        store: db.store,
        executors: [sync],
        submitWindows: { 'doc.sync': { debounceMs: 1_000, key } },
      });
      await expect(
        bad.client.transaction((tx) => bad.client.submitCoalesced(tx, 'doc.sync', { doc: 'c', n: 1 })),
      ).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    }
    expect((await rows()).map((r) => r.bizKey)).toEqual(['doc-b']);
  });

  it('a submit in a transaction that rolls back leaves nothing; a type without a window is refused', async () => {
    const { runtime, submit } = runtimeWith({ debounceMs: 1_000 });
    await expect(
      runtime.client.transaction(async (tx) => {
        await runtime.client.submitCoalesced(tx, 'doc.sync', { doc: 'a', n: 1 }, { key: 'rolled' });
        throw new Error('business rule');
      }),
    ).rejects.toThrow('business rule');
    expect(await rows()).toEqual([]);
    const plain = createAsyncCommands({ store: db.store, executors: [sync] });
    await expect(
      plain.client.transaction((tx) =>
        plain.client.submitCoalesced(tx, 'doc.sync', { doc: 'a', n: 1 }, { key: 'k' }),
      ),
    ).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    await expect(submit(1, { runAt: new Date() } as never)).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    expect(await rows()).toEqual([]);
  });

  it('leading throttle (drop): the first submit of a quiet key is due at once; the window drops the rest', async () => {
    const { clock, submit } = runtimeWith({ throttleMs: 10_000, edge: 'leading' });
    const move = (ms: number) => (clock.at = new Date(BASE.getTime() + ms));
    const first = await submit(1);
    expect(first).toMatchObject({ outcome: 'created', duplicate: false });
    expect((await db.store.get(first.id))?.nextRunAt.toISOString()).toBe(at(0));
    move(4_000);
    expect(await submit(2)).toEqual({ id: first.id, duplicate: true, replaced: false, outcome: 'throttled' });
    await succeed(db.store, first.id);
    // Finished, but its window lasts to 10 s: a submit in it is dropped, answering the command
    // that took the window.
    move(8_000);
    expect(await submit(3)).toEqual({ id: first.id, duplicate: true, replaced: false, outcome: 'throttled' });
    move(10_000);
    const next = await submit(4);
    expect(next.outcome).toBe('created');
    const row = await db.store.get(next.id);
    expect(row).toMatchObject({ status: 'PENDING', payload: { doc: 'a', n: 4 } });
    expect(row?.nextRunAt.toISOString()).toBe(at(10_000));
    // Another key has a window of its own.
    expect((await submit(5, { key: 'doc-b' })).outcome).toBe('created');
    const pending = (await rows()).filter((r) => r.status === 'PENDING').map((r) => r.payload as Edit);
    expect(pending.sort((x, y) => x.n - y.n)).toEqual([
      { doc: 'a', n: 4 },
      { doc: 'a', n: 5 },
    ]);
  });

  it('leading throttle (merge): a submit in the window makes one command due when it ends; later ones give it their payload', async () => {
    const { clock, submit } = runtimeWith({ throttleMs: 10_000, edge: 'leading', later: 'merge' });
    const move = (ms: number) => (clock.at = new Date(BASE.getTime() + ms));
    const first = await submit(1);
    await succeed(db.store, first.id);
    move(3_000);
    const trailing = await submit(2);
    expect(trailing).toMatchObject({ outcome: 'created', duplicate: false });
    move(5_000);
    expect(await submit(3)).toEqual({
      id: trailing.id,
      duplicate: true,
      replaced: true,
      outcome: 'throttled',
    });
    const row = await db.store.get(trailing.id);
    expect(row?.payload).toEqual({ doc: 'a', n: 3 });
    expect(row?.nextRunAt.toISOString()).toBe(at(10_000));
    // The trailing command opened the next window, 10 s after its due time.
    await succeed(db.store, trailing.id);
    move(12_000);
    const third = await submit(4);
    expect(third.outcome).toBe('created');
    expect((await db.store.get(third.id))?.nextRunAt.toISOString()).toBe(at(20_000));
    // While that command is PENDING a submit merges into it, even once its window has come.
    move(21_000);
    expect(await submit(5)).toEqual({ id: third.id, duplicate: true, replaced: true, outcome: 'throttled' });
    // RUNNING: never changed, nothing stored.
    await claim(db.store, third.id);
    move(22_000);
    expect(await submit(6)).toEqual({ id: third.id, duplicate: true, replaced: false, outcome: 'running' });
  });

  it('leading throttle: 20 concurrent submits of a quiet key leave one command due at once; a rollback leaves no window', async () => {
    const { runtime, submit } = runtimeWith({ throttleMs: 60_000, edge: 'leading', later: 'merge' });
    await expect(
      runtime.client.transaction(async (tx) => {
        await runtime.client.submitCoalesced(tx, 'doc.sync', { doc: 'a', n: 0 }, { key: 'race' });
        throw new Error('business rule');
      }),
    ).rejects.toThrow('business rule');
    expect(await rows()).toEqual([]);
    const { results, order } = await race(runtime);
    expect(results.filter((r) => r.outcome === 'created')).toHaveLength(1);
    expect(results.filter((r) => r.outcome === 'throttled')).toHaveLength(19);
    const [row, ...more] = await rows();
    expect(more).toEqual([]);
    expect(row?.payload).toEqual({ doc: 'a', n: order.at(-1) });
    expect(row?.nextRunAt.toISOString()).toBe(at(0));
    // A payload that is not JSON is refused before the key's window is touched.
    await expect(
      runtime.client.transaction((tx) =>
        runtime.client.submitCoalesced(tx, 'doc.sync', { doc: 'a', n: 10n } as never, { key: 'bad' }),
      ),
    ).rejects.toMatchObject({ name: 'PayloadNotSerialisableError' });
    expect(await db.store.transaction((tx) => db.store.submitWindows.hold(tx, 'doc.sync', 'bad'))).toBeNull();
    expect((await submit(1, { key: 'bad' })).outcome).toBe('created');
  });

  it("the retention's purge prunes the windows that have ended", async () => {
    const { clock, submit } = runtimeWith({ throttleMs: 10_000, edge: 'leading' });
    const first = await submit(1);
    await succeed(db.store, first.id);
    clock.at = new Date(BASE.getTime() + 5_000);
    expect((await submit(2)).outcome).toBe('throttled');
    // The window ended 59 minutes ago on the database clock: pruned with the finished commands.
    await purgeFinished(db.store, { olderThanMs: 60_000 });
    expect((await submit(3)).outcome).toBe('created');
  });

  it('bad windows are refused when the runtime is built', () => {
    const bad: unknown[] = [
      { debounceMs: 0 },
      { debounceMs: -5 },
      { throttleMs: 1.5 },
      { throttleMs: 2 ** 31 },
      { debounceMs: '100' },
      {},
      { debounceMs: 10, throttleMs: 10 },
      { debounceMs: 10, later: 'drop' },
      { throttleMs: 10, later: 'keep' },
      { throttleMs: 10, key: 'doc' },
      { debounceMs: 10, windowMs: 10 },
      { throttleMs: 10, edge: 'both' },
      { debounceMs: 10, edge: 'leading' },
      null,
      [],
    ];
    for (const window of bad) {
      const r = refusal(() =>
        createAsyncCommands({
          store: db.store,
          executors: [sync],
          submitWindows: { 'doc.sync': window } as never,
        }),
      );
      expect(r, JSON.stringify(window)).toEqual({
        code: 'INVALID_ARGUMENT',
        message: expect.stringContaining('`submitWindows`'),
      });
    }
    const longer = refusal(() =>
      createAsyncCommands({
        store: db.store,
        executors: [sync],
        retention: { olderThanMs: 60_000 },
        submitWindows: { 'doc.sync': { throttleMs: 60_001 } },
      }),
    );
    expect(longer).toEqual({ code: 'INVALID_ARGUMENT', message: expect.stringContaining('retention') });
    expect(
      refusal(() =>
        createAsyncCommands({ store: db.store, executors: [sync], submitWindows: { '': { debounceMs: 1 } } }),
      ),
    ).toMatchObject({ code: 'INVALID_ARGUMENT' });
  });
});
