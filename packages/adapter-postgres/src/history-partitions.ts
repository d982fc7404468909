import type { Logger } from '@asynccmd/core';
import { partitionPlan, partitionWidthMs, type HistoryPartition } from '@asynccmd/core/store-kit';
import type { PostgresConnection } from './connection.js';
import type { TableNames } from './names.js';
import { purgeLinks } from './sql.js';

/*
 * The history in time partitions (migration 25). The history table is partitioned by finish time,
 * so retention drops a partition whose every row is past the cutoff instead of deleting its rows
 * one by one: no dead row versions for vacuum to clear, no index entries to remove, the space back
 * at once. The partitions are made by the purge (`HistoryPartitions.maintain`), ahead of time, at
 * a width from the retention the purge is given; a DEFAULT partition takes any row no partition
 * covers (no purge yet, or none for a while), and the row-by-row purge reaches it as before.
 *
 * The history before this migration stays where it was, renamed to `<table>_history_v1`: made a
 * partition it would have to be scanned under a lock that stops every completion (its rows must be
 * shown to fall in the partition's range), so it stays a table of its own that every read of a
 * command also looks in, and that the row-by-row purge empties as the retention passes it.
 *
 * Locks: a partition is made with ATTACH (SHARE UPDATE EXCLUSIVE on the history: completions and
 * reads go on; a brief ACCESS EXCLUSIVE on the DEFAULT partition, which is empty when the
 * partitions are ahead of the clock) and dropped with DROP TABLE (ACCESS EXCLUSIVE on the history
 * until its transaction commits: completions wait a moment). Both wait at most LOCK_TIMEOUT for a
 * lock: behind a long reader of the history, the purge gives up for this round (the row-by-row
 * purge still deletes what is due) instead of queueing every completion behind its lock request.
 */

/** The longest a partition's DDL waits for a lock before this round of maintenance gives up. */
export const PARTITION_LOCK_TIMEOUT_MS = 200;

/** A partition's name: the history's, `_h_` and its lower bound in UTC to the minute (15 characters). */
export function partitionName(n: TableNames, lowerMs: number): string {
  const iso = new Date(lowerMs).toISOString(); // 2026-12-07T03:00:00.000Z
  const stamp = iso.slice(0, 16).replace(/[-T:]/g, '');
  return n.index(`h_${stamp}`);
}

/** Migration 25: the history partitioned by finish time, the one before it kept as `<table>_history_v1`. */
export function historyPartitionsDdl(n: TableNames): string[] {
  const h = n.history;
  const literal = (name: string): string => `'${name.replace(/'/g, "''")}'`;
  return [
    // The history of migration 21 keeps its rows, its indexes and their names under its new name.
    `DO $$ BEGIN
       IF (SELECT relkind FROM pg_class WHERE oid = to_regclass(${literal(h)})) = 'r' THEN
         ALTER TABLE ${h} RENAME TO ${n.index('history_v1')};
       END IF;
     END $$`,
    `CREATE TABLE IF NOT EXISTS ${h} (LIKE ${n.table} INCLUDING DEFAULTS INCLUDING CONSTRAINTS)
       PARTITION BY RANGE (finished_at)`,
    `ALTER TABLE ${h} ALTER COLUMN finished_at SET NOT NULL`,
    // The readers' indexes, made on every partition; a row by id goes through each partition's
    // primary key (a unique index of a partitioned table must hold its partition key).
    `CREATE INDEX IF NOT EXISTS ${n.index('hp_created_idx')} ON ${h} (created_at, id)`,
    `CREATE INDEX IF NOT EXISTS ${n.index('hp_biz_idx')} ON ${h} (type, biz_key)`,
    `CREATE INDEX IF NOT EXISTS ${n.index('hp_finish_idx')} ON ${h} (finished_at)`,
    `CREATE TABLE IF NOT EXISTS ${n.historyDefault} PARTITION OF ${h} DEFAULT`,
    primaryKeyOn(n.historyDefault),
  ];
}

/** Adds the primary key (id) to `table` unless it has one: re-runs cleanly. */
function primaryKeyOn(table: string): string {
  return `DO $$ BEGIN
       IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conrelid = '${table.replace(/'/g, "''")}'::regclass AND contype = 'p') THEN
         ALTER TABLE ${table} ADD PRIMARY KEY (id);
       END IF;
     END $$`;
}

/** SQLSTATEs after which maintenance gives up for this round, quietly: a lock not had in time. */
const LOCK_NOT_AVAILABLE = '55P03';
/** …and with one warning: the role may not change the history's partitions. */
const INSUFFICIENT_PRIVILEGE = '42501';

/**
 * The partitions of one store's history: read, dropped past the retention, made ahead of the clock.
 * One instance at a time (a transaction-scoped advisory lock: the others skip the round).
 */
export class HistoryPartitions<Tx> {
  #warned = false;
  /**
   * The cutoff of the last round that ran to its end: a purge runs batch after batch with one
   * cutoff (purgeFinished), and after its first round the partitions have nothing left to do for it.
   */
  #doneFor: number | null = null;

  constructor(
    private readonly connection: PostgresConnection<Tx>,
    private readonly n: TableNames,
    private readonly logger: Logger,
  ) {}

  /**
   * Drops the partitions wholly finished before `olderThan` and makes those ahead of the clock, in
   * one short transaction. Answers how many rows the dropped partitions held (0 when this round
   * gave up: the row-by-row purge then deletes what is due).
   */
  async maintain(olderThan: Date): Promise<number> {
    const cutoff = olderThan.getTime();
    if (cutoff === this.#doneFor) return 0;
    try {
      const dropped = await this.connection.transaction((tx) => this.#maintainIn(tx, cutoff));
      this.#doneFor = cutoff;
      return dropped;
    } catch (error) {
      const code = (error as { code?: unknown } | null)?.code;
      if (code === LOCK_NOT_AVAILABLE) {
        this.logger.info(
          {},
          'asynccmd: history partitions not maintained this round: a lock was not free in time',
        );
        return 0;
      }
      if (code === INSUFFICIENT_PRIVILEGE && !this.#warned) {
        this.#warned = true;
        this.logger.warn(
          {},
          "asynccmd: the store's role may not add or drop the history's partitions (it must own the history table): retention deletes row by row",
        );
        return 0;
      }
      if (code === INSUFFICIENT_PRIVILEGE) return 0;
      throw error;
    }
  }

  async #maintainIn(tx: Tx, olderThanMs: number): Promise<number> {
    const c = this.connection;
    const n = this.n;
    const locked = await c.queryIn<{ locked: boolean | string }>(
      tx,
      `SELECT pg_try_advisory_xact_lock(hashtext($1)) AS locked, set_config('lock_timeout', $2, true)`,
      [`asynccmd:partitions:${n.lockKey}`, `${PARTITION_LOCK_TIMEOUT_MS}ms`],
    );
    if (!isTrue(locked.rows[0]?.locked)) return 0;
    const read = await c.queryIn<{ name: string; lower: string | null; upper: string | null }>(
      tx,
      `SELECT p.relname AS name,
              (extract(epoch FROM (regexp_match(b.bound, 'FROM \\(''([^'']*)''\\)'))[1]::timestamptz) * 1000)::bigint AS lower,
              (extract(epoch FROM (regexp_match(b.bound, 'TO \\(''([^'']*)''\\)'))[1]::timestamptz) * 1000)::bigint AS upper
         FROM pg_inherits AS i
         JOIN pg_class AS p ON p.oid = i.inhrelid
         CROSS JOIN LATERAL (SELECT pg_get_expr(p.relpartbound, p.oid) AS bound) AS b
        WHERE i.inhparent = $1::regclass AND b.bound <> 'DEFAULT'`,
      [n.history],
    );
    const nowRow = await c.queryIn<{ now: string; newest: string | null }>(
      tx,
      `SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now,
              (extract(epoch FROM (SELECT max(finished_at) FROM ${n.historyDefault})) * 1000)::bigint AS newest`,
    );
    const nowMs = Number(nowRow.rows[0]?.now);
    const newest = nowRow.rows[0]?.newest;
    const partitions: HistoryPartition[] = read.rows
      .filter((r) => r.lower !== null && r.upper !== null)
      .map((r) => ({ name: r.name, lowerMs: Number(r.lower), upperMs: Number(r.upper) }));
    const plan = partitionPlan(
      partitions,
      newest == null ? null : Number(newest),
      nowMs,
      olderThanMs,
      partitionWidthMs(nowMs - olderThanMs),
    );
    // Made first: ATTACH leaves completions and reads going; the drops' lock on the history is
    // then held only from the first drop to the COMMIT.
    for (const range of plan.make) await this.#attach(tx, range.lowerMs, range.upperMs);
    const quoted = (p: HistoryPartition): string => `${n.schema}."${p.name.replace(/"/g, '""')}"`;
    // The edges and workflow steps of the commands about to go, before the first drop takes its
    // lock: a drop has no ids to take them by, as a row-by-row purge does.
    if (plan.drop.length > 0) {
      const linked = await c.queryIn<{ linked: boolean | string }>(
        tx,
        `SELECT EXISTS (SELECT 1 FROM ${n.dependencies}) OR EXISTS (SELECT 1 FROM ${n.workflowSteps}) AS linked`,
      );
      if (isTrue(linked.rows[0]?.linked)) {
        for (const p of plan.drop) await c.queryIn(tx, `WITH ${purgeLinks(n, quoted(p))} SELECT 1`);
      }
    }
    let dropped = 0;
    for (const p of plan.drop) {
      const counted = await c.queryIn<{ rows: string }>(tx, `SELECT count(*) AS rows FROM ${quoted(p)}`);
      dropped += Number(counted.rows[0]?.rows ?? 0);
      await c.queryIn(tx, `DROP TABLE ${quoted(p)}`);
    }
    return dropped;
  }

  /** Makes the partition [lowerMs, upperMs): an empty table with the history's columns and a primary key, attached. */
  async #attach(tx: Tx, lowerMs: number, upperMs: number): Promise<void> {
    const c = this.connection;
    const name = `${this.n.schema}.${partitionName(this.n, lowerMs)}`;
    await c.queryIn(
      tx,
      `CREATE TABLE ${name} (LIKE ${this.n.history} INCLUDING DEFAULTS INCLUDING CONSTRAINTS)`,
    );
    await c.queryIn(tx, `ALTER TABLE ${name} ADD PRIMARY KEY (id)`);
    await c.queryIn(
      tx,
      `ALTER TABLE ${this.n.history} ATTACH PARTITION ${name}
         FOR VALUES FROM ('${new Date(lowerMs).toISOString()}') TO ('${new Date(upperMs).toISOString()}')`,
    );
  }
}

/** A boolean column as the connection gives it (pg: boolean; as text: 't'). */
function isTrue(value: boolean | string | undefined): boolean {
  return value === true || value === 't' || value === 'true';
}
