import { EFFECT_TABLE } from '../protocol.js';
import type { Measurement } from '../report.js';
import type { Target } from '../stats.js';
import { TRANSACTIONAL_SPARE_CONNECTIONS } from '../systems/effects.js';
import { findRow, shapeLabel, shapesOf, type DrainRow } from './drain-rows.js';
import type { Recorder } from './recorder.js';
import type { DrainShape } from './sizes.js';

/**
 * The effect drains (`--scenarios effects`): each command inserts one row into the application's
 * EFFECT_TABLE, in the system's schema or database — by a transactional executor (the row and the
 * SUCCESS in one transaction), by a plain one in a transaction of its own, and on PostgreSQL by
 * graphile-worker's task — beside asynccmd's no-op drain in the same shape and repeat.
 */

/** `noop`: the no-op drain, run here only when the drain scenario has none in this shape. */
export type EffectSystem =
  'noop' | 'transactional' | 'transactional-tuned' | 'own-transaction' | 'graphile' | 'raw';

export const NOOP_LABEL = 'asynccmd defaults, no-op';
export const TRANSACTIONAL_LABEL = 'asynccmd, transactional executor';
export const OWN_TRANSACTION_LABEL = 'asynccmd, insert in its own transaction';
export const RAW_EFFECT_LABEL = 'raw SQL, exactly once (reference)';

/** The tuned transactional row's `transactionGroupMs` (the runtime's default: 20). */
export const TUNED_GROUP_MS = 50;
export const TUNED_TRANSACTIONAL_LABEL = `asynccmd, transactional executor, tuned: transactionGroupMs ${TUNED_GROUP_MS}`;

/** The tuned transactional row: the default row's settings but one. */
export function tunedTransactionalSettings(): string {
  return `as the transactional executor's row, with transactionGroupMs ${TUNED_GROUP_MS} (default 20): a shared transaction takes waiting attempts for up to ${TUNED_GROUP_MS} ms after its BEGIN, its first attempts' row locks and SUCCESS waiting that much longer for the COMMIT`;
}

const TABLE = `${EFFECT_TABLE} (seq, created_at), no unique constraint, created empty before each run`;

export const noopSettings = (defaults: string): string =>
  `${defaults}; the drain scenario's no-op row, run here because that scenario does not run this shape`;

const STORE_POOL = `store pool C + ${TRANSACTIONAL_SPARE_CONNECTIONS} connections`;
const OWN_POOL = 'on a connection pool of its own (C connections)';

/**
 * What the transactional row runs; `store`: the store's settings on this database, `storePool`
 * its connections.
 */
export function transactionalSettings(store: string, storePool = STORE_POOL): string {
  return `defineTransactionalExecutor, transactional: true, executor mode ASYNC_POOL, sharedPool { concurrency: C }: one INSERT into ${TABLE}, through ctx.tx; the runtime writes its SUCCESS (fenced by the claim token) in that transaction and commits; attempts waiting in the pool share a transaction (transactionGroupSize default 32: a savepoint each, one fenced SUCCESS statement and one COMMIT for all); ${storePool}; ${store}; checked: exactly one effect row per command`;
}

/** What the non-transactional row runs (for reference: not exactly once); `own`: its connections. */
export function ownTransactionSettings(store: string, own = OWN_POOL): string {
  return `defineExecutor, executor mode ASYNC_POOL, sharedPool { concurrency: C }: the same INSERT autocommitted ${own}, then the runtime writes SUCCESS as for any executor, batched; ${store}; a crash between the two would insert again (not exactly once); effect rows counted`;
}

/** The raw-SQL reference row (PostgreSQL): `batch` rows a claim, `group` a transaction. */
export function rawEffectSettings(batch: number, group: number): string {
  return `no runtime: one connection claims ${batch} at a time (the raw loop's claim, synchronous_commit off); each of C connections takes up to ${group} claimed commands into one durable transaction, one round trip each (BEGIN or a SAVEPOINT, and the same INSERT into ${EFFECT_TABLE}, as one simple query), then the fenced complete of them all (prepared) and the COMMIT, a round trip each; checked: exactly one effect row per command. What the transactional row's statements cost with nothing around them`;
}

/** graphile-worker's row: the drain's local-queue settings, the insert in its task. */
export function graphileEffectSettings(graphile: string): string {
  return `${graphile}; the task runs the same INSERT through helpers.query (its pool, autocommitted: its own transaction, the job's completion batched after it; not exactly once); effect rows counted`;
}

/**
 * The ratios of the effect drains, per shape. `noopOf`: the no-op drain's row in a shape (the
 * drain scenario's, when it ran it); `graphileNoopOf`: graphile-worker's no-op row. `targeted`:
 * whether the targets apply in a shape (PostgreSQL at C=10); elsewhere the ratios are for
 * information.
 */
export function effectRatios(
  rec: Recorder,
  section: string,
  rows: readonly DrainRow<EffectSystem>[],
  noopOf: (shape: DrainShape) => Measurement | undefined,
  targeted: (shape: DrainShape) => boolean,
  graphileNoopOf: (shape: DrainShape) => Measurement | undefined = () => undefined,
): void {
  for (const shape of shapesOf(rows)) {
    const at = shapeLabel(shape);
    const row = (system: EffectSystem): Measurement | undefined => findRow(rows, system, shape);
    const ratio = (
      label: string,
      a: Measurement | undefined,
      b: Measurement | undefined,
      t: Target,
    ): void => {
      if (a && b) rec.ratio(section, `${label}, ${at}`, a, b, t);
    };
    const target = (t: Target): Target => (targeted(shape) ? t : {});
    const transactional = row('transactional');
    const own = row('own-transaction');
    const noop = row('noop') ?? noopOf(shape);
    const graphile = row('graphile');
    ratio('asynccmd transactional / asynccmd defaults no-op', transactional, noop, target({ atLeast: 0.5 }));
    ratio(
      'asynccmd transactional / graphile-worker local queue, same insert',
      transactional,
      graphile,
      target({ atLeast: 1 }),
    );
    const raw = row('raw');
    ratio(
      `asynccmd transactional, tuned transactionGroupMs ${TUNED_GROUP_MS} / asynccmd defaults no-op`,
      row('transactional-tuned'),
      noop,
      {},
    );
    // The raw reference over the no-op drain bounds what the 0.5× target can reach on the machine.
    ratio('raw SQL exactly once / asynccmd defaults no-op', raw, noop, {});
    ratio('asynccmd transactional / raw SQL exactly once', transactional, raw, {});
    ratio('asynccmd transactional / asynccmd insert in its own transaction', transactional, own, {});
    ratio('asynccmd insert in its own transaction / asynccmd defaults no-op', own, noop, {});
    ratio('graphile-worker with insert / graphile-worker no-op', graphile, graphileNoopOf(shape), {});
  }
}
