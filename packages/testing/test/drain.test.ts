import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { exponentialBackoff, immediateBackoff, type CommandEvent } from '@asynccmd/core';
import { defineExecutor, type AnyExecutor } from '@asynccmd/runtime';
import { createTestKit, DrainLimitError, type TestKitOptions } from '@asynccmd/testing';

const kits: { close(): Promise<void> }[] = [];
afterEach(async () => {
  await Promise.all(kits.splice(0).map((kit) => kit.close()));
});

/** A kit closed after the test. */
async function kitWith<const E extends readonly AnyExecutor[], const S extends readonly string[] = []>(
  executors: E,
  more: Omit<TestKitOptions, 'executors' | 'submitOnlyTypes'> & { submitOnlyTypes?: S } = {},
) {
  const kit = await createTestKit({ executors, ...more });
  kits.push(kit);
  return kit;
}

/** For executors that submit through the kit they run in: any type, any payload. */
type LooseKit = Awaited<ReturnType<typeof kitWith<readonly AnyExecutor[]>>>;

/** An executor that records each payload it runs with. */
function recorder<T extends string>(
  type: T,
  options: { mode?: 'IMMEDIATE' | 'SCHEDULED' | 'ASYNC_POOL' } = {},
) {
  const ran: unknown[] = [];
  const executor = defineExecutor<T, { n: number }>({
    type,
    ...options,
    execute: (payload) => void ran.push(payload),
  });
  return { executor, ran };
}

/** An executor whose attempts finish only once `release()` is called. */
function waiting<T extends string>(type: T) {
  const waiters: (() => void)[] = [];
  const executor = defineExecutor<T, { n: number }>({
    type,
    execute: () => new Promise<void>((resolve) => void waiters.push(resolve)),
  });
  return { executor, release: () => waiters.splice(0).forEach((resolve) => resolve()) };
}

describe('drainUntilIdle', () => {
  it('reports what a succeeded attempt left with ctx.setResult, as the store holds it', async () => {
    const invoice = defineExecutor<'r.invoice', { n: number }>({
      type: 'r.invoice',
      execute: ({ n }, ctx) => (n > 0 ? ctx.setResult({ invoice: `INV-${n}` }) : undefined),
    });
    const kit = await kitWith([invoice]);
    expect(await kit.runOnce('r.invoice', { n: 7 })).toMatchObject({
      outcome: 'succeeded',
      result: { invoice: 'INV-7' },
    });
    await kit.transaction((_tx, submit) => submit('r.invoice', { n: 0 }));
    expect((await kit.drainUntilIdle()).attempts).toMatchObject([{ outcome: 'succeeded', result: null }]);
  });

  it('takes ctx.progress and reports the progress each attempt left, as the store holds it', async () => {
    const importing = defineExecutor<'r.import', { rows: number }>({
      type: 'r.import',
      maxRetry: 1,
      backoff: immediateBackoff,
      execute: ({ rows }, ctx) => {
        for (let done = 0; done <= rows; done++) ctx.progress({ done, total: rows });
        if (ctx.attempt === 1 && rows > 5) throw new Error('the file ended early');
      },
    });
    const kit = await kitWith([importing]);
    expect(await kit.runOnce('r.import', { rows: 5 })).toMatchObject({
      outcome: 'succeeded',
      progress: { done: 5, total: 5 },
    });
    await kit.transaction((_tx, submit) => submit('r.import', { rows: 10 }));
    expect((await kit.drainUntilIdle()).attempts).toMatchObject([
      { outcome: 'retried', progress: { done: 10, total: 10 } },
      { outcome: 'succeeded', progress: { done: 10, total: 10 } },
    ]);
    // Bad progress fails the attempt, as it would in a runtime.
    const bad = defineExecutor<'r.bad', object>({
      type: 'r.bad',
      maxRetry: 0,
      execute: (_p, ctx) => ctx.progress({ done: 2, total: 1 }),
    });
    const other = await kitWith([bad]);
    expect(await other.runOnce('r.bad', {})).toMatchObject({
      outcome: 'dead',
      error: expect.stringContaining('progress takes'),
    });
  });

  it('leaves the commands of a paused type PENDING, as a runtime does, until it is resumed', async () => {
    const paused = recorder('p.paused');
    const other = recorder('p.other');
    const kit = await kitWith([paused.executor, other.executor]);
    await kit.store.typePauses!.pause('p.paused', 'downstream down');
    await kit.transaction(async (_tx, submit) => {
      await submit('p.paused', { n: 1 });
      await submit('p.other', { n: 2 });
    });
    await kit.drainUntilIdle();
    expect(paused.ran).toEqual([]);
    expect(other.ran).toEqual([{ n: 2 }]);
    expect((await kit.submitted('p.paused')).map((c) => c.status)).toEqual(['PENDING']);
    await kit.store.typePauses!.resume('p.paused');
    await kit.drainUntilIdle();
    expect(paused.ran).toEqual([{ n: 1 }]);
  });

  it('runs IMMEDIATE, SCHEDULED and ASYNC_POOL commands inline, oldest due first, and reports each', async () => {
    const immediate = recorder('a.immediate', { mode: 'IMMEDIATE' });
    const scheduled = recorder('a.scheduled', { mode: 'SCHEDULED' });
    const pooled = defineExecutor<'a.pooled', { n: number }>({
      type: 'a.pooled',
      mode: 'ASYNC_POOL',
      pool: 'reports', // a pool the test never declares: the kit runs everything inline
      execute: () => undefined,
    });
    const kit = await kitWith([immediate.executor, scheduled.executor, pooled]);
    const started: string[] = [];
    kit.on((e) => {
      if (e.kind === 'started') started.push(`${e.command.type}@${e.runner}`);
    });
    await kit.transaction(async (_tx, submit) => {
      await submit('a.pooled', { n: 1 });
      await submit('a.immediate', { n: 2 });
      await submit('a.scheduled', { n: 3 }, { runAt: new Date(kit.clock.now().getTime() - 1_000) });
    });

    const result = await kit.drainUntilIdle();

    expect(result.rounds).toBe(1);
    expect(result.attempts.map((a) => [a.type, a.outcome, a.attempt, a.round])).toEqual([
      ['a.scheduled', 'succeeded', 1, 1], // due a second earlier
      ['a.pooled', 'succeeded', 1, 1],
      ['a.immediate', 'succeeded', 1, 1],
    ]);
    expect(started).toEqual(['a.scheduled@inline', 'a.pooled@inline', 'a.immediate@inline']);
    expect((await kit.submitted()).map((c) => c.status)).toEqual(['SUCCESS', 'SUCCESS', 'SUCCESS']);
    expect(await kit.drainUntilIdle()).toEqual({ rounds: 0, attempts: [], reclaimed: [] });
  });

  it('runs what executors submit in the next round', async () => {
    const shipped: string[] = [];
    const confirm = defineExecutor<'order.confirm', { orderId: string }>({
      type: 'order.confirm',
      execute: ({ orderId }) =>
        kit.transaction((_tx, submit) => submit('order.ship', { orderId })).then(() => undefined),
    });
    const ship = defineExecutor<'order.ship', { orderId: string }>({
      type: 'order.ship',
      mode: 'IMMEDIATE',
      execute: ({ orderId }) => void shipped.push(orderId),
    });
    const kit: LooseKit = await kitWith([confirm, ship] as readonly AnyExecutor[]);
    await kit.transaction(async (_tx, submit) => {
      await submit('order.confirm', { orderId: 'o-1' });
      await submit('order.confirm', { orderId: 'o-2' });
    });

    const result = await kit.drainUntilIdle();

    expect(result.rounds).toBe(2);
    expect(result.attempts.map((a) => `${a.round}:${a.type}`)).toEqual([
      '1:order.confirm',
      '1:order.confirm',
      '2:order.ship',
      '2:order.ship',
    ]);
    expect(shipped).toEqual(['o-1', 'o-2']);
  });

  it('leaves a retry for advance(): it runs once the backoff has passed on the test clock', async () => {
    let calls = 0;
    const flaky = defineExecutor<'mail.send', { to: string }>({
      type: 'mail.send',
      backoff: exponentialBackoff({ baseMs: 1_000 }),
      execute: () => {
        calls++;
        if (calls <= 2) throw new Error(`mail server down (call ${calls})`);
      },
    });
    const kit = await kitWith([flaky]);
    const start = kit.clock.now().getTime();
    await kit.transaction((_tx, submit) => submit('mail.send', { to: 'ann' }));

    const first = await kit.drainUntilIdle();
    expect(first.attempts).toEqual([
      {
        id: '1',
        type: 'mail.send',
        payload: { to: 'ann' },
        attempt: 1,
        round: 1,
        progress: null,
        outcome: 'retried',
        error: 'mail server down (call 1)',
        nextRunAt: new Date(start + 1_000),
      },
    ]);

    kit.advance(999);
    expect((await kit.drainUntilIdle()).attempts).toEqual([]);
    kit.advance(1);
    const second = await kit.drainUntilIdle();
    expect(second.attempts).toMatchObject([
      {
        attempt: 2,
        outcome: 'retried',
        error: 'mail server down (call 2)',
        nextRunAt: new Date(start + 3_000),
      },
    ]);

    kit.advance(2_000);
    expect((await kit.drainUntilIdle()).attempts).toMatchObject([{ attempt: 3, outcome: 'succeeded' }]);
    const [row] = await kit.submitted('mail.send');
    // A success clears lastError; the failures stay in the attempt history.
    expect(row).toMatchObject({ status: 'SUCCESS', retryCount: 2, lastError: null });
    expect(row?.history.map((a) => [a.outcome, a.error])).toEqual([
      ['failed', 'mail server down (call 1)'],
      ['failed', 'mail server down (call 2)'],
      ['succeeded', null],
    ]);
  });

  it('runs a delayed command only once the clock reaches its runAt', async () => {
    const reminder = recorder('cart.remind');
    const kit = await kitWith([reminder.executor]);
    const runAt = new Date(kit.clock.now().getTime() + 3_600_000);
    await kit.transaction((_tx, submit) => submit('cart.remind', { n: 1 }, { runAt }));

    expect((await kit.drainUntilIdle()).attempts).toEqual([]);
    kit.advance(3_599_999);
    expect((await kit.drainUntilIdle()).attempts).toEqual([]);
    kit.advance(1);
    expect((await kit.drainUntilIdle()).attempts).toMatchObject([
      { type: 'cart.remind', outcome: 'succeeded' },
    ]);
    expect(reminder.ran).toEqual([{ n: 1 }]);
  });

  it('turns the failure after the last retry into a dead letter', async () => {
    const broken = defineExecutor<'erp.sync', { orderId: string }>({
      type: 'erp.sync',
      maxRetry: 1,
      backoff: { delayMs: () => 500 },
      execute: () => {
        throw new TypeError('ERP rejected the order');
      },
    });
    const kit = await kitWith([broken]);
    await kit.transaction((_tx, submit) => submit('erp.sync', { orderId: 'o-9' }));

    expect((await kit.drainUntilIdle()).attempts).toMatchObject([{ outcome: 'retried', attempt: 1 }]);
    kit.advance(500);
    const last = await kit.drainUntilIdle();

    expect(last.attempts).toEqual([
      expect.objectContaining({ outcome: 'dead', attempt: 2, error: 'TypeError: ERP rejected the order' }),
    ]);
    const [row] = await kit.submitted('erp.sync');
    expect(row).toMatchObject({ status: 'DEAD', retryCount: 2, finishedAt: kit.clock.now() });
    kit.advance(3_600_000);
    expect((await kit.drainUntilIdle()).attempts).toEqual([]);
  });

  it('reports an outcome refused because the claim was taken away while it ran as fenced', async () => {
    const selfKilling = defineExecutor<'job.kill', { n: number }>({
      type: 'job.kill',
      execute: async (_payload, ctx) => {
        await kit.store.kill(ctx.id, 'an operator killed it mid-run');
      },
    });
    const kit: LooseKit = await kitWith([selfKilling] as readonly AnyExecutor[]);
    const fenced: CommandEvent[] = [];
    kit.on((e) => {
      if (e.kind === 'fenced') fenced.push(e);
    });
    await kit.transaction((_tx, submit) => submit('job.kill', { n: 1 }));

    const result = await kit.drainUntilIdle();

    expect(result.attempts).toMatchObject([{ type: 'job.kill', outcome: 'fenced' }]);
    expect(fenced).toHaveLength(1);
    expect(await kit.submitted()).toMatchObject([
      { status: 'CANCELLED', lastError: 'an operator killed it mid-run' },
    ]);
  });

  it('stops a runaway chain of submits after maxRounds with DrainLimitError, and puts the next round back', async () => {
    const echo = defineExecutor<'echo', { n: number }>({
      type: 'echo',
      execute: async ({ n }) => {
        await kit.transaction((_tx, submit) => submit('echo', { n: n + 1 }));
      },
    });
    const kit: LooseKit = await kitWith([echo] as readonly AnyExecutor[], { maxRounds: 5 });
    await kit.transaction((_tx, submit) => submit('echo', { n: 1 }));

    const error = await kit.drainUntilIdle().then(
      () => null,
      (e: unknown) => e,
    );

    expect(error).toBeInstanceOf(DrainLimitError);
    const limit = error as DrainLimitError;
    expect(limit.code).toBe('DRAIN_LIMIT');
    expect(limit.rounds).toBe(5);
    expect(limit.stillDue).toEqual(['echo']);
    expect(limit.attempts.map((a) => a.payload)).toEqual([{ n: 1 }, { n: 2 }, { n: 3 }, { n: 4 }, { n: 5 }]);
    expect(limit.message).toBe(
      'drainUntilIdle() stopped after 5 rounds with 1 command(s) still due (echo ×1): an executor probably ' +
        'submits a new command every time it runs. Raise maxRounds if the chain is meant to be this long.',
    );
    // The sixth command was claimed to see that work was left, then released: PENDING, untouched.
    expect((await kit.submitted('echo')).at(-1)).toMatchObject({
      payload: { n: 6 },
      status: 'PENDING',
      retryCount: 0,
      claimToken: null,
    });
    await expect(kit.drainUntilIdle({ maxRounds: 2 })).rejects.toMatchObject({
      code: 'DRAIN_LIMIT',
      rounds: 2,
    });
  });

  it('fails loudly when the runtime could not record an outcome (a backoff policy that throws)', async () => {
    const misconfigured = defineExecutor<'bad.backoff', { n: number }>({
      type: 'bad.backoff',
      backoff: {
        delayMs: () => {
          throw new RangeError('no delay configured');
        },
      },
      execute: () => {
        throw new Error('downstream failed');
      },
    });
    const kit = await kitWith([misconfigured]);
    await kit.transaction((_tx, submit) => submit('bad.backoff', { n: 1 }));

    await expect(kit.drainUntilIdle()).rejects.toThrow(
      'the outcome of command 1 (bad.backoff) was not recorded: no delay configured',
    );
  });

  it('refuses a second drain while one is running', async () => {
    const { executor: slow, release } = waiting('slow');
    const kit = await kitWith([slow]);
    await kit.transaction((_tx, submit) => submit('slow', { n: 1 }));

    const first = kit.drainUntilIdle();
    await expect(kit.drainUntilIdle()).rejects.toMatchObject({ code: 'DRAIN_IN_PROGRESS' });
    await expect(kit.runOnce('slow', { n: 2 })).rejects.toMatchObject({ code: 'DRAIN_IN_PROGRESS' });
    await new Promise((resolve) => setTimeout(resolve, 20));
    release();
    expect((await first).attempts).toMatchObject([{ outcome: 'succeeded' }]);
  });
});

describe('hung attempts and leases on the test clock', () => {
  it('fails an attempt that outlives hangTimeoutMs as its executor timeout would, when it has one', async () => {
    const stuck = defineExecutor<'slow.call', { n: number }>({
      type: 'slow.call',
      timeoutMs: 30_000,
      execute: (_payload, ctx) =>
        new Promise<void>((_resolve, reject) =>
          ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason)),
        ),
    });
    const kit = await kitWith([stuck]);
    await kit.transaction((_tx, submit) => submit('slow.call', { n: 1 }));

    const result = await kit.drainUntilIdle({ hangTimeoutMs: 50 });

    expect(result.attempts).toMatchObject([
      { outcome: 'retried', error: 'TimeoutError: command timed out after 30000 ms' },
    ]);
  });

  it('treats an instance whose attempt hangs with no timeout as dead; the lease lapses on advance()', async () => {
    let calls = 0;
    let firstSignal: AbortSignal | null = null;
    const hangsOnce = defineExecutor<'report.render', { reportId: string }>({
      type: 'report.render',
      mode: 'ASYNC_POOL',
      leaseMs: 10_000,
      execute: (_payload, ctx) => {
        calls++;
        if (calls > 1) return;
        firstSignal = ctx.signal;
        return new Promise<void>(() => undefined); // never settles, ignores its signal
      },
    });
    const kit = await kitWith([hangsOnce]);
    const claimedAt = kit.clock.now().getTime();
    await kit.transaction((_tx, submit) => submit('report.render', { reportId: 'r-1' }));

    const first = await kit.drainUntilIdle({ hangTimeoutMs: 50 });

    expect(first.attempts).toMatchObject([{ type: 'report.render', outcome: 'hung', attempt: 1 }]);
    expect((firstSignal as AbortSignal | null)?.aborted).toBe(true);
    const [held] = await kit.submitted();
    // As a crashed instance leaves it: RUNNING, its lease ending leaseMs after the claim (test clock).
    expect(held).toMatchObject({ status: 'RUNNING', leaseUntil: new Date(claimedAt + 10_000) });
    expect(await kit.drainUntilIdle()).toEqual({ rounds: 0, attempts: [], reclaimed: [] });

    kit.advance(9_999);
    expect((await kit.drainUntilIdle()).reclaimed).toEqual([]);
    kit.advance(2);
    const second = await kit.drainUntilIdle();

    expect(second.reclaimed).toEqual([{ id: held!.id, type: 'report.render', status: 'PENDING' }]);
    expect(second.attempts).toMatchObject([{ outcome: 'succeeded' }]);
    expect(await kit.submitted()).toMatchObject([{ status: 'SUCCESS', rescueCount: 1, retryCount: 0 }]);
    expect(calls).toBe(2);
  });

  it('writes nothing for a dead instance, even when its executor finishes later', async () => {
    const { executor: late, release: finishLate } = waiting('late');
    const kit = await kitWith([late]);
    const events: string[] = [];
    kit.on((e) => events.push(e.kind));
    await kit.transaction((_tx, submit) => submit('late', { n: 1 }));

    expect((await kit.drainUntilIdle({ hangTimeoutMs: 30 })).attempts).toMatchObject([{ outcome: 'hung' }]);
    finishLate();
    await new Promise((resolve) => setTimeout(resolve, 20));

    expect(await kit.submitted()).toMatchObject([{ status: 'RUNNING' }]);
    expect(events).toEqual(['submitted', 'claimed', 'started']);
  });

  it('stamps rows with the test clock: the database clock follows it', async () => {
    const ok = recorder('stamp');
    const kit = await kitWith([ok.executor]);
    const t0 = kit.clock.now();
    await kit.transaction((_tx, submit) => submit('stamp', { n: 1 }));
    const t1 = kit.advance(1_234);
    await kit.drainUntilIdle();

    const [row] = await kit.submitted();
    expect(row).toMatchObject({ createdAt: t0, nextRunAt: t0, startedAt: t1, finishedAt: t1, updatedAt: t1 });
    expect(await kit.store.now()).toEqual(t1);
  });
});

describe('runOnce', () => {
  it('submits and runs one command at once, leaving what it submits PENDING', async () => {
    const confirm = defineExecutor<'order.confirm', { orderId: string }>({
      type: 'order.confirm',
      execute: async ({ orderId }) => {
        await kit.transaction((_tx, submit) => submit('order.ship', { orderId }));
      },
    });
    const ship = recorder('order.ship');
    const kit: LooseKit = await kitWith([confirm, ship.executor] as readonly AnyExecutor[]);

    const attempt = await kit.runOnce('order.confirm', { orderId: 'o-7' }, { bizKey: 'o-7' });

    expect(attempt).toMatchObject({ type: 'order.confirm', outcome: 'succeeded', attempt: 1, round: 1 });
    expect(await kit.submitted()).toMatchObject([
      { type: 'order.confirm', status: 'SUCCESS', bizKey: 'o-7' },
      { type: 'order.ship', status: 'PENDING', payload: { orderId: 'o-7' } },
    ]);
    expect(ship.ran).toEqual([]);
  });

  it('refuses a type without an executor before writing anything', async () => {
    const kit = await kitWith([recorder('known').executor], { submitOnlyTypes: ['elsewhere'] });
    await expect(kit.runOnce('elsewhere', { n: 1 })).rejects.toMatchObject({ code: 'UNKNOWN_COMMAND_TYPE' });
    expect(await kit.submitted()).toEqual([]);
  });
});

describe('submits through the kit', () => {
  it('validates as the runtime does and writes nothing on rollback', async () => {
    const kit = await kitWith([recorder('known').executor], { maxPayloadBytes: 64 });
    kit.db.exec('CREATE TABLE orders (id TEXT PRIMARY KEY)');

    await expect(
      // @ts-expect-error: not a type of this kit
      kit.transaction((_tx, submit) => submit('unknown.type', {})),
    ).rejects.toMatchObject({ code: 'UNKNOWN_COMMAND_TYPE' });
    await expect(
      kit.transaction((_tx, submit) => submit('known', { n: 1, padding: 'x'.repeat(100) } as { n: number })),
    ).rejects.toMatchObject({ code: 'PAYLOAD_TOO_LARGE' });
    await expect(
      kit.transaction(async (tx, submit) => {
        tx.prepare('INSERT INTO orders (id) VALUES (?)').run('o-1');
        await submit('known', { n: 1 });
        throw new Error('business rule failed');
      }),
    ).rejects.toThrow('business rule failed');

    expect(await kit.submitted()).toEqual([]);
    expect(kit.db.prepare('SELECT count(*) FROM orders').pluck().get()).toBe(0);
  });
});

describe('createTestKit', () => {
  it('shares a database handle of yours, in its own table, and leaves it open on close', async () => {
    const db = new Database(':memory:');
    db.exec('CREATE TABLE orders (id TEXT PRIMARY KEY)');
    const kit = await createTestKit({
      executors: [recorder('known').executor],
      database: db,
      table: 'my_commands',
    });
    await kit.transaction(async (tx, submit) => {
      tx.prepare('INSERT INTO orders (id) VALUES (?)').run('o-1');
      await submit('known', { n: 1 });
    });
    await kit.drainUntilIdle();
    await kit.close();

    expect(db.open).toBe(true);
    expect(db.prepare('SELECT id FROM orders').pluck().all()).toEqual(['o-1']);
    // A finished command lives in the table's history (the adapter's migration 20 on SQLite).
    expect(
      db
        .prepare(
          'SELECT type, status FROM my_commands UNION ALL SELECT type, status FROM my_commands_history',
        )
        .all(),
    ).toEqual([{ type: 'known', status: 'SUCCESS' }]);
    db.close();
  });

  it('refuses bad options with the runtime typed errors and leaves nothing open', async () => {
    const db = new Database(':memory:');
    const twice = recorder('twice').executor;
    await expect(createTestKit({ executors: [twice, twice], database: db })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    await expect(createTestKit({ executors: [twice], table: 'x; DROP TABLE y' })).rejects.toMatchObject({
      code: 'INVALID_IDENTIFIER',
    });
    await expect(createTestKit({ executors: [twice], maxRounds: 0 })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
    expect(db.open).toBe(true); // a handle of yours is never closed by the kit
    db.close();
  });
});
