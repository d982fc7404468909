import { AssertionError } from 'node:assert';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { defineExecutor } from '@asynccmd/runtime';
import { createTestKit, TestClock, DEFAULT_TEST_START } from '@asynccmd/testing';

interface ShipPayload {
  orderId: string;
  address: { city: string; zip: string };
  lines: { sku: string; qty: number }[];
}

const ship = defineExecutor<'order.ship', ShipPayload>({ type: 'order.ship', execute: () => undefined });
const notify = defineExecutor<'order.notify', { orderId: string }>({
  type: 'order.notify',
  execute: () => undefined,
});

async function newKit() {
  return createTestKit({ executors: [ship, notify], submitOnlyTypes: ['billing.invoice'] });
}
let kit: Awaited<ReturnType<typeof newKit>>;

beforeEach(async () => {
  kit = await newKit();
  await kit.transaction(async (_tx, submit) => {
    await submit('order.ship', {
      orderId: 'o-1',
      address: { city: 'Lyon', zip: '69001' },
      lines: [{ sku: 'mug', qty: 2 }],
    });
    await submit('order.notify', { orderId: 'o-1' });
    await submit('order.ship', {
      orderId: 'o-2',
      address: { city: 'Oslo', zip: '0150' },
      lines: [
        { sku: 'mug', qty: 1 },
        { sku: 'tea', qty: 3 },
      ],
    });
    await submit('billing.invoice', { orderId: 'o-1', cents: 1999 });
  });
});
afterEach(async () => {
  await kit.close();
});

/** The error a promise rejects with. */
async function failureOf(work: Promise<unknown>): Promise<unknown> {
  return work.then(
    () => expect.unreachable('expected a failure'),
    (error: unknown) => error,
  );
}

describe('expectSubmitted', () => {
  it('matches partial objects at any depth and returns the oldest match', async () => {
    const match = await kit.expectSubmitted('order.ship', { address: { city: 'Oslo' } });
    expect(match).toMatchObject({
      id: '3',
      type: 'order.ship',
      status: 'PENDING',
      payload: { orderId: 'o-2' },
    });
    expect((await kit.expectSubmitted('order.ship')).id).toBe('1');
    await kit.expectSubmitted('order.ship', { lines: [{ sku: 'mug' }, { qty: 3 }] });
    await kit.expectSubmitted('billing.invoice', { cents: 1999 }); // a submit-only type
  });

  it('takes a predicate over the payload and the command row', async () => {
    await kit.expectSubmitted('order.ship', (p, command) => p.lines.length === 2 && command.id === '3');
    await kit.expectSubmitted('order.ship', { orderId: 'o-1' }, { count: 1 });
    await kit.expectSubmitted('order.ship', (p) => p.lines.some((l) => l.sku === 'mug'), { count: 2 });
  });

  it('compares arrays element by element and by length, values exactly', async () => {
    await expect(kit.expectSubmitted('order.ship', { lines: [{ sku: 'tea' }] })).rejects.toThrow(
      AssertionError,
    );
    await expect(kit.expectSubmitted('order.ship', { address: { zip: 69001 } } as never)).rejects.toThrow(
      AssertionError,
    );
    await expect(kit.expectSubmitted('order.ship', { lines: { sku: 'mug' } } as never)).rejects.toThrow(
      AssertionError,
    );
  });

  it('fails with node:assert AssertionError listing what was submitted', async () => {
    const error = await failureOf(kit.expectSubmitted('order.ship', { orderId: 'o-3' }));

    expect(error).toBeInstanceOf(AssertionError);
    const failure = error as AssertionError;
    expect(failure.code).toBe('ERR_ASSERTION');
    expect(failure.operator).toBe('expectSubmitted');
    expect(failure.message).toBe(
      [
        'expected a submitted "order.ship" command with a payload matching {"orderId":"o-3"}, but none was.',
        'Submitted (4):',
        '  #1 order.ship PENDING {"orderId":"o-1","address":{"city":"Lyon","zip":"69001"},"lines":[{"sku":"mug","qty":2}]}',
        '  #2 order.notify PENDING {"orderId":"o-1"}',
        '  #3 order.ship PENDING {"orderId":"o-2","address":{"city":"Oslo","zip":"0150"},"lines":[{"sku":"mug","qty":1},{"sku":"tea","qty":3}]}',
        '  #4 billing.invoice PENDING {"orderId":"o-1","cents":1999}',
      ].join('\n'),
    );
    // What a runner's diff shows: the payloads of that type against the matcher.
    expect(failure.expected).toEqual([{ orderId: 'o-3' }]);
    expect(failure.actual).toEqual([
      expect.objectContaining({ orderId: 'o-1' }),
      expect.objectContaining({ orderId: 'o-2' }),
    ]);
  });

  it('says how many matched when a count is not met, and names a predicate', async () => {
    const counted = await failureOf(kit.expectSubmitted('order.ship', {}, { count: 3 }));
    expect((counted as Error).message.split('\n')[0]).toBe(
      'expected exactly 3 submitted "order.ship" commands with a payload matching {}, but 2 were.',
    );
    const isBig = (p: ShipPayload) => p.lines.length > 5;
    const predicate = await failureOf(kit.expectSubmitted('order.ship', isBig));
    expect((predicate as Error).message.split('\n')[0]).toBe(
      'expected a submitted "order.ship" command with a payload satisfying predicate isBig, but none was.',
    );
    await expect(kit.expectSubmitted('order.ship', undefined, { count: 0 })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
    });
  });

  it('says "Nothing was submitted." on an empty table, and counts only committed commands', async () => {
    const empty = await newKit();
    try {
      await expect(
        empty.transaction(async (_tx, submit) => {
          await submit('order.notify', { orderId: 'o-9' });
          throw new Error('rolled back');
        }),
      ).rejects.toThrow('rolled back');
      const error = await failureOf(empty.expectSubmitted('order.notify'));
      expect((error as Error).message).toBe(
        'expected a submitted "order.notify" command with any payload, but none was.\nNothing was submitted.',
      );
    } finally {
      await empty.close();
    }
  });

  it('lists at most 20 commands and shortens long payloads', async () => {
    await kit.transaction(async (_tx, submit) => {
      for (let i = 0; i < 25; i++) await submit('order.notify', { orderId: `bulk-${i}-${'x'.repeat(200)}` });
    });
    const error = await failureOf(kit.expectSubmitted('order.notify', { orderId: 'nope' }));
    const lines = (error as Error).message.split('\n');
    expect(lines[1]).toBe('Submitted (29):');
    expect(lines).toHaveLength(2 + 20 + 1);
    expect(lines.at(-1)).toBe('  … and 9 more');
    expect(lines[6]).toMatch(/^ {2}#5 order\.notify PENDING \{"orderId":"bulk-0-x+…$/);
    expect(lines[6]!.length).toBeLessThan(200);
  });

  it('is typed by the kit: unknown types and wrong payload shapes do not compile', async () => {
    // @ts-expect-error: no executor and not submit-only
    await expect(kit.expectSubmitted('order.unknown')).rejects.toThrow(AssertionError);
    // @ts-expect-error: orderId is a string
    await expect(kit.expectSubmitted('order.notify', { orderId: 1 })).rejects.toThrow(AssertionError);
  });
});

describe('expectNotSubmitted and submitted', () => {
  it('passes when nothing matches and fails naming how many did', async () => {
    await kit.expectNotSubmitted('order.ship', { orderId: 'o-3' });
    await kit.expectNotSubmitted('order.notify', { orderId: 'o-2' });
    const error = await failureOf(kit.expectNotSubmitted('order.ship', { lines: [{ sku: 'mug' }] }));
    expect(error).toBeInstanceOf(AssertionError);
    expect((error as AssertionError).operator).toBe('expectNotSubmitted');
    expect((error as AssertionError).expected).toEqual([]);
    expect((error as AssertionError).actual).toEqual([expect.objectContaining({ orderId: 'o-1' })]);
    expect((error as Error).message.split('\n')[0]).toBe(
      'expected no submitted "order.ship" command with a payload matching {"lines":[{"sku":"mug"}]}, but 1 was.',
    );
  });

  it('reads the commands oldest first, all or of one type, in their current state', async () => {
    expect((await kit.submitted()).map((c) => `${c.id}:${c.type}`)).toEqual([
      '1:order.ship',
      '2:order.notify',
      '3:order.ship',
      '4:billing.invoice',
    ]);
    const shipped = await kit.submitted('order.ship');
    expect(shipped.map((c) => c.payload.orderId)).toEqual(['o-1', 'o-2']);
    await kit.drainUntilIdle();
    expect((await kit.submitted()).map((c) => c.status)).toEqual([
      'SUCCESS',
      'SUCCESS',
      'SUCCESS',
      'PENDING',
    ]);
  });

  it('pages through more than one page of the store', async () => {
    await kit.transaction((tx) =>
      kit.client.submitMany(
        tx,
        Array.from({ length: 1_500 }, (_, i) => ({
          type: 'order.notify' as const,
          payload: { orderId: `p-${i}` },
        })),
      ),
    );
    const all = await kit.submitted('order.notify');
    expect(all).toHaveLength(1_501);
    expect(all.at(-1)?.payload.orderId).toBe('p-1499');
  });
});

describe('TestClock', () => {
  it('starts at a fixed instant and moves only when told', () => {
    const clock = new TestClock();
    expect(clock.now()).toEqual(DEFAULT_TEST_START);
    expect(clock.advance(1_500)).toEqual(new Date(DEFAULT_TEST_START.getTime() + 1_500));
    expect(clock.set(new Date('2029-06-01T00:00:00Z'))).toEqual(new Date('2029-06-01T00:00:00Z'));
    expect(() => clock.advance(-1)).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
    expect(() => clock.advance(Number.NaN)).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
    expect(() => new TestClock(new Date('nonsense'))).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT' }),
    );
  });

  it('drives the kit from startAt; dates in your own SQL still work', async () => {
    const at = new Date('2031-02-03T04:05:06.789Z');
    const other = await createTestKit({ executors: [notify], startAt: at });
    try {
      expect(other.clock.now()).toEqual(at);
      const row = other.db
        .prepare(
          "SELECT unixepoch('subsec') AS subsec, unixepoch('now') AS now, unixepoch('2000-01-01') AS fixed",
        )
        .get();
      expect(row).toEqual({
        subsec: at.getTime() / 1000,
        now: Math.floor(at.getTime() / 1000),
        fixed: 946_684_800,
      });
    } finally {
      await other.close();
    }
  });
});
