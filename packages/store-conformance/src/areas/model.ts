import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import * as E from 'fp-ts/lib/Either.js';
import * as core from '@asynccmd/core';
import type { AdminTransition, CommandState, CommandStore } from '@asynccmd/core';
import { ATTEMPT_HISTORY_LENGTH } from '@asynccmd/core/store-kit';
import type { StoreHarnessFactory } from '../harness.js';
import { freshToken, uniqueType, untilDatabaseClockPasses, useArea } from '../support.js';

/**
 * Model-based test: random sequences of operations are applied to the store and to core's pure
 * transition functions; after every step the rows must equal the model's states.
 */
type Op =
  | { kind: 'submit'; count: number; offsetMs: number; maxRetry: number; typeIx: number }
  | { kind: 'claim'; limit: number; typeMask: number; shortLease: boolean }
  | { kind: 'claimById'; pick: number; typeMask: number; shortLease: boolean }
  | { kind: 'complete' | 'release' | 'heartbeat'; pick: number; stale: boolean }
  | { kind: 'fail'; pick: number; stale: boolean; message: string }
  | { kind: 'releaseRevoked'; pick: number; stale: boolean }
  | { kind: 'reclaim' }
  | { kind: 'admin'; transition: AdminTransition; pick: number; reason: string | undefined }
  | { kind: 'advance'; ms: number };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({
    kind: fc.constant('submit' as const),
    count: fc.integer({ min: 1, max: 3 }),
    offsetMs: fc.integer({ min: -2_000, max: 2_000 }),
    maxRetry: fc.integer({ min: 0, max: 2 }),
    typeIx: fc.integer({ min: 0, max: 1 }),
  }),
  fc.record({
    kind: fc.constant('claim' as const),
    limit: fc.integer({ min: 1, max: 3 }),
    typeMask: fc.integer({ min: 1, max: 3 }),
    shortLease: fc.boolean(),
  }),
  fc.record({
    kind: fc.constant('claimById' as const),
    pick: fc.nat(),
    typeMask: fc.integer({ min: 1, max: 3 }),
    shortLease: fc.boolean(),
  }),
  fc.record({
    kind: fc.constantFrom('complete' as const, 'release' as const, 'heartbeat' as const),
    pick: fc.nat(),
    stale: fc.boolean(),
  }),
  fc.record({
    kind: fc.constant('fail' as const),
    pick: fc.nat(),
    stale: fc.boolean(),
    message: fc.string({ unit: 'grapheme', maxLength: 600 }),
  }),
  fc.record({ kind: fc.constant('releaseRevoked' as const), pick: fc.nat(), stale: fc.boolean() }),
  fc.constant({ kind: 'reclaim' as const }),
  fc.record({
    kind: fc.constant('admin' as const),
    transition: fc.constantFrom(...core.ADMIN_TRANSITIONS),
    pick: fc.nat(),
    reason: fc.option(fc.string({ maxLength: 40 }), { nil: undefined }),
  }),
  fc.record({ kind: fc.constant('advance' as const), ms: fc.integer({ min: 0, max: 3_000 }) }),
);

interface Modelled {
  readonly id: string;
  readonly type: string;
  state: CommandState;
  shortLease: boolean;
  leaseUntil: number | null;
  /** How each attempt ended, oldest first: what the history must end with. */
  readonly attempts: core.AttemptOutcome[];
  /**
   * A requeue's hold on a PENDING command: the old claim's token, and its lease (short: run out
   * once the database clock passes `until`). Nobody claims the command until that claim lets go
   * or a short lease has run out.
   */
  heldBack: { readonly token: string; readonly until: number; readonly short: boolean } | null;
}

const MAX_RESCUES = 1;
const backoff = core.exponentialBackoff({ baseMs: 1_000, capMs: 4_000 });
const compareIds = (a: string, b: string): number =>
  BigInt(a) < BigInt(b) ? -1 : BigInt(a) > BigInt(b) ? 1 : 0;

async function runSequence<Tx>(store: CommandStore<Tx>, ops: readonly Op[]): Promise<void> {
  const types = [uniqueType('m0'), uniqueType('m1')];
  const rows: Modelled[] = [];
  let now = (await store.now()).getTime();
  const pick = (n: number): Modelled | undefined => rows[n % Math.max(1, rows.length)];
  const tokenFor = (m: Modelled, stale: boolean): string =>
    stale || !m.state.claimToken ? freshToken() : m.state.claimToken;
  const step = (m: Modelled, r: E.Either<unknown, CommandState>): boolean => {
    if (E.isRight(r)) m.state = r.right;
    return E.isRight(r);
  };
  /**
   * Commands a claim at `now` may take. Short holds of requeues run out: wait until the database
   * clock is past them, so the store and the model agree. Long ones hold throughout.
   */
  const claimable = async (
    candidates: readonly Modelled[],
    wanted: readonly string[],
  ): Promise<Modelled[]> => {
    const due = candidates.filter(
      (m) => m.state.status === 'PENDING' && wanted.includes(m.type) && m.state.nextRunAt.getTime() <= now,
    );
    const short = due.flatMap((m) => (m.heldBack?.short ? [m.heldBack.until] : []));
    if (short.length > 0) await untilDatabaseClockPasses(store, new Date(Math.max(...short)));
    return due.filter((m) => m.heldBack === null || m.heldBack.short);
  };
  const claimed = (m: Modelled, token: string, shortLease: boolean, leaseUntil: Date | null): void => {
    expect(step(m, core.claim(m.state, token))).toBe(true);
    m.shortLease = shortLease;
    m.leaseUntil = leaseUntil!.getTime();
    m.heldBack = null;
  };

  for (const op of ops) {
    switch (op.kind) {
      case 'submit': {
        const type = types[op.typeIx]!;
        const runAt = new Date(now + op.offsetMs);
        const ids = await store.transaction((tx) =>
          store.insert(
            tx,
            Array.from({ length: op.count }, () => ({
              type,
              payloadJson: '{}',
              maxRetry: op.maxRetry,
              runAt,
            })),
          ),
        );
        for (const id of ids) {
          rows.push({
            id,
            type,
            shortLease: false,
            leaseUntil: null,
            attempts: [],
            heldBack: null,
            state: {
              status: 'PENDING',
              maxRetry: op.maxRetry,
              retryCount: 0,
              rescueCount: 0,
              retryCountAtRetry: 0,
              rescueCountAtRetry: 0,
              claimToken: null,
              nextRunAt: runAt,
              lastError: null,
            },
          });
        }
        break;
      }
      case 'claim': {
        const wanted = types.filter((_, i) => op.typeMask & (1 << i));
        const expected = (await claimable(rows, wanted))
          .sort((a, b) => a.state.nextRunAt.getTime() - b.state.nextRunAt.getTime() || compareIds(a.id, b.id))
          .slice(0, op.limit);
        const token = freshToken();
        const rowsClaimed = await store.claimDue({
          types: wanted,
          limit: op.limit,
          now: new Date(now),
          token,
          leaseMs: op.shortLease ? 1 : 600_000,
        });
        expect(rowsClaimed.map((c) => c.id)).toEqual(expected.map((m) => m.id));
        for (const [i, m] of expected.entries()) claimed(m, token, op.shortLease, rowsClaimed[i]!.leaseUntil);
        break;
      }
      case 'claimById': {
        const m = pick(op.pick);
        if (!m) break;
        const wanted = types.filter((_, i) => op.typeMask & (1 << i));
        const expected = (await claimable([m], wanted)).length === 1;
        const token = freshToken();
        const row = await store.claimById({
          id: m.id,
          types: wanted,
          now: new Date(now),
          token,
          leaseMs: op.shortLease ? 1 : 600_000,
        });
        expect(row?.id ?? null).toBe(expected ? m.id : null);
        if (row) claimed(m, token, op.shortLease, row.leaseUntil);
        break;
      }
      case 'complete':
      case 'release':
      case 'heartbeat': {
        const m = pick(op.pick);
        if (!m) break;
        const token = tokenFor(m, op.stale);
        const ref = { id: m.id, token };
        if (op.kind === 'complete') {
          const done = await store.complete([ref]);
          const ok = step(m, core.succeed(m.state, token));
          expect(done.includes(m.id)).toBe(ok);
          if (ok) m.attempts.push('succeeded');
        } else if (op.kind === 'release') {
          const done = await store.release([ref]);
          expect(done.includes(m.id)).toBe(step(m, core.release(m.state, token)));
        } else {
          const held = await store.heartbeat([ref], 600_000);
          const ok = step(m, core.heartbeat(m.state, token));
          expect(held.length === 1).toBe(ok);
          if (ok) m.shortLease = false;
        }
        break;
      }
      case 'fail': {
        const m = pick(op.pick);
        if (!m) break;
        const token = tokenFor(m, op.stale);
        const outcome = core.decideFailure(m.state, op.message, new Date(now), backoff);
        const written = await store.fail([{ ref: { id: m.id, token }, outcome }]);
        const legal = step(m, core.fail(m.state, token, op.message, new Date(now), backoff));
        expect(written).toEqual(legal ? [m.id] : []);
        if (legal) m.attempts.push(outcome.status === 'DEAD' ? 'dead' : 'failed');
        break;
      }
      case 'releaseRevoked': {
        const m = pick(op.pick);
        if (!m) break;
        const token = op.stale || m.heldBack === null ? freshToken() : m.heldBack.token;
        const letGo = m.state.status === 'PENDING' && m.heldBack?.token === token;
        expect(await store.releaseRevoked([{ id: m.id, token }])).toEqual(letGo ? [m.id] : []);
        if (letGo) m.heldBack = null;
        break;
      }
      case 'reclaim': {
        const hung = rows.filter((m) => m.state.status === 'RUNNING' && m.shortLease);
        if (hung.length > 0) {
          await untilDatabaseClockPasses(store, new Date(Math.max(...hung.map((m) => m.leaseUntil!))));
        }
        const ours = new Set(rows.map((m) => m.id));
        const reclaimed = (await store.reclaimHung({ limit: 1000, maxRescues: MAX_RESCUES })).filter((r) =>
          ours.has(r.id),
        );
        expect(reclaimed.map((r) => r.id).sort(compareIds)).toEqual(hung.map((m) => m.id).sort(compareIds));
        for (const m of hung) {
          // The due time is kept either way (compared below with every other field).
          expect(step(m, core.reclaim(m.state, MAX_RESCUES))).toBe(true);
          expect(reclaimed.find((r) => r.id === m.id)?.status).toBe(m.state.status);
          m.attempts.push(m.state.status === 'DEAD' ? 'dead' : 'lease_expired');
          m.shortLease = false;
        }
        break;
      }
      case 'admin': {
        const m = pick(op.pick);
        if (!m) break;
        const at = new Date(now);
        const [actual, expected] =
          op.transition === 'retry'
            ? [await store.retry(m.id, at), core.retry(m.state, at)]
            : op.transition === 'requeue'
              ? [await store.requeue(m.id, at), core.requeue(m.state, at)]
              : op.transition === 'kill'
                ? [await store.kill(m.id, op.reason), core.kill(m.state, op.reason)]
                : [await store.cancel(m.id, op.reason), core.cancel(m.state, op.reason)];
        expect(E.isRight(actual)).toBe(E.isRight(expected));
        if (E.isLeft(actual)) expect(actual.left.code).toBe('ILLEGAL_TRANSITION');
        const wasRunning = m.state.status === 'RUNNING';
        const token = m.state.claimToken;
        if (step(m, expected)) {
          if (wasRunning) m.attempts.push(op.transition === 'requeue' ? 'requeued' : 'killed');
          // A requeue holds the command back for its old claim; every other transition ends a hold.
          m.heldBack =
            op.transition === 'requeue' ? { token: token!, until: m.leaseUntil!, short: m.shortLease } : null;
        }
        if (E.isRight(expected)) m.shortLease = false;
        break;
      }
      case 'advance':
        now += op.ms;
        break;
    }
    await expectStoreMatchesModel(store, rows);
  }
}

async function expectStoreMatchesModel<Tx>(
  store: CommandStore<Tx>,
  rows: readonly Modelled[],
): Promise<void> {
  if (rows.length === 0) return;
  const records = await store.getMany(rows.map((m) => m.id));
  const byId = new Map(records.map((r) => [r.id, r]));
  for (const m of rows) {
    const r = byId.get(m.id);
    expect(r, `command ${m.id}`).toBeDefined();
    const actual = {
      status: r!.status,
      maxRetry: r!.maxRetry,
      retryCount: r!.retryCount,
      rescueCount: r!.rescueCount,
      retryCountAtRetry: r!.retryCountAtRetry,
      rescueCountAtRetry: r!.rescueCountAtRetry,
      claimToken: r!.claimToken,
      nextRunAt: r!.nextRunAt.getTime(),
      lastError: r!.lastError,
      attempts: r!.history.map((a) => a.outcome),
    };
    expect(actual, `command ${m.id}`).toEqual({
      ...m.state,
      nextRunAt: m.state.nextRunAt.getTime(),
      attempts: m.attempts.slice(-ATTEMPT_HISTORY_LENGTH),
    });
  }
}

export function modelArea<Tx>(factory: StoreHarnessFactory<Tx>, adapter: string): void {
  describe('model: the store agrees with the core state machine', () => {
    const ctx = useArea(factory, adapter, 'mdl');

    it('random operation sequences leave the rows exactly where the pure transitions say', async () => {
      await fc.assert(
        fc.asyncProperty(fc.array(opArb, { minLength: 1, maxLength: 30, size: 'max' }), (ops) =>
          runSequence(ctx.store(), ops),
        ),
        { numRuns: 100 },
      );
    });
  });
}
