import { LIMITS, type Logger } from '@asynccmd/core';
import {
  COMMAND_TABLE_COLUMNS,
  partitionPlan,
  partitionWidthMs,
  type HistoryPartition,
} from '@asynccmd/core/store-kit';
import type { Pool, PoolConnection } from 'mysql2/promise';
import { inTransaction, isLockConflict, LostRaceError, select, withConnection, write } from './connection.js';
import { anyLinksSql, commandLinks } from './purge-links.js';
import { fromUtcText, toUtcText } from './rows.js';

/*
 * Finished commands leave the command table (migration 19). A SUCCESS is written in place, as
 * before, by the statement that completes it; once a retention purges finished commands, the
 * store moves them, in the background and in batches (`HistoryMover`), into `<table>_history`:
 * each batch copies its rows and deletes them from the command table in one transaction, so a
 * snapshot sees a command in exactly one of the two tables. The command table that claims,
 * heartbeats and reclaims read then holds unfinished work and about a second of finished rows,
 * however much history is kept: its pages stay in the buffer pool, and retention no longer
 * deletes from it what finished minutes ago.
 *
 * What stays in the command table, as before: DEAD and CANCELLED commands (rare, and still part of
 * the queue: an admin retry starts from DEAD, a DEAD command holds its ordering key, a cancelled
 * dependant may revive), and a recurring schedule's tick (its once-per-tick key is a unique index of
 * the command table and must hold for the life of the row).
 *
 * The history is partitioned by finish time (RANGE COLUMNS): retention drops a partition whose
 * every row is past the cutoff (`HistoryPartitions`) instead of deleting its rows one by one. The
 * MAXVALUE partition takes any row no partition covers (no retention, or none for a while); a
 * partition made later takes its rows out of it (REORGANIZE PARTITION copies them: nothing to copy
 * while the partitions are kept ahead of the clock).
 *
 * Every read of a command (get, list, stats, outcome counts, the fencing checks of a retried
 * outcome, dependencies) reads both tables in one statement.
 */

/** The history table of command table `t`. */
export const historyTable = (t: string): string => `${t}_history`;

/** Migration 19: the history, partitioned by finish time, with the indexes its readers use. */
export function historyDdl(t: string, collation: string): string[] {
  return [
    // The command table's columns (no generated ones, no checks: rows arrive finished), with the
    // finish time in the primary key (a partitioned table's unique keys must hold its partition key).
    `CREATE TABLE IF NOT EXISTS \`${historyTable(t)}\` (
      id                    BIGINT UNSIGNED NOT NULL,
      type                  VARCHAR(128)    NOT NULL,
      biz_key               VARCHAR(255)    NULL,
      payload               LONGTEXT        NOT NULL,
      status                VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
      max_retry             INT             NOT NULL,
      retry_count           INT             NOT NULL,
      rescue_count          INT             NOT NULL,
      next_run_at           DATETIME(3)     NOT NULL,
      last_error            VARCHAR(500)    NULL,
      owner                 VARCHAR(128)    NULL,
      claim_token           VARCHAR(128)    NULL,
      lease_until           DATETIME(3)     NULL,
      idempotent            TINYINT(1)      NOT NULL,
      headers               TEXT            NOT NULL,
      created_at            DATETIME(3)     NOT NULL,
      updated_at            DATETIME(3)     NOT NULL,
      started_at            DATETIME(3)     NULL,
      finished_at           DATETIME(3)     NOT NULL,
      claimed_by            VARCHAR(128)    NULL,
      retry_count_at_retry  INT             NOT NULL,
      rescue_count_at_retry INT             NOT NULL,
      history               TEXT            NULL,
      schedule_name         VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NULL,
      schedule_tick         DATETIME(3)     NULL,
      priority              SMALLINT        NOT NULL,
      ordering_key          VARCHAR(128)    NULL,
      result                LONGTEXT        NULL,
      waiting_for           INT             NOT NULL,
      blocked_by            INT             NOT NULL,
      has_dependants        TINYINT(1)      NOT NULL,
      dependency_cancelled  TINYINT(1)      NOT NULL,
      progress_done         BIGINT UNSIGNED NULL,
      progress_total        BIGINT UNSIGNED NULL,
      flow_key              VARCHAR(${LIMITS.rateKeyChars}) CHARACTER SET utf8mb4 COLLATE ${collation} NULL,
      PRIMARY KEY (id, finished_at),
      -- Lists (newest first), lists of a type or a business key, outcome counts and purges by finish time.
      -- (created_at, id) spelled out: a partitioned table's ordered scans do not use the primary
      -- key InnoDB appends, and lists order by both.
      KEY idx_h_created (created_at, id),
      KEY idx_h_type_biz (type, biz_key),
      KEY idx_h_finished (finished_at)
    ) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = ${collation} ROW_FORMAT = DYNAMIC
      PARTITION BY RANGE COLUMNS (finished_at) (PARTITION ${CATCH_ALL} VALUES LESS THAN (MAXVALUE))`,
  ];
}

/** The partition that takes what no other covers. */
const CATCH_ALL = 'pmax';

/** Rows one batch of the move takes: a short transaction, row locks on finished rows only. */
export const MOVE_BATCH = 2000;
/** Batches one move runs at most before it lets the next nudge go on. */
const MOVE_BATCHES = 10;
/** How often a busy store moves (the hot paths nudge; at most one move at a time per store). */
export const MOVE_INTERVAL_MS = 1000;
/**
 * How far back of the newest row it moved a move looks again: a completion's finish time is taken
 * when its statement runs, and it may commit a moment after a later one.
 */
const MOVE_LOOKBACK_MS = 60_000;

/** The start of idx_finished's finished rows, as a move's position. */
const START: MovePosition = { at: '1000-01-01 00:00:00.000', id: '0' };

/** A place in idx_finished's order: a finish time (UTC text) and an id. */
interface MovePosition {
  readonly at: string;
  readonly id: string;
}

/** The statements of the move, for command table `t`. */
export function moveSql(t: string, skipLocked: boolean) {
  const columns = COMMAND_TABLE_COLUMNS.join(', ');
  return {
    /**
     * Up to ? SUCCESS rows past the position (finished_at, id) bound as ?, ?, ?, oldest first in
     * idx_finished's order, locked (rows another transaction holds are skipped, where the server
     * can); `movable` is 0 for a schedule's tick, which stays: its once-per-tick key holds for the
     * life of the row. The ticks are read too, so the position moves past them. The command with
     * the highest id stays too: a server whose AUTO_INCREMENT does not survive a restart (MySQL
     * 5.7) starts again at the command table's MAX(id) + 1, which must stay above every id moved.
     *
     * The candidates are read without locks, then locked by primary key: each row moved leaves a
     * delete-marked entry in idx_finished, which InnoDB does not purge while a snapshot older than
     * it is held, and a locking read under READ COMMITTED looks every one it passes up in the
     * primary key. A move starts a minute back of the newest row it moved (MOVE_LOOKBACK_MS): a
     * locking read from there would look up a minute of moved rows each second of such a hold.
     */
    pick: `SELECT c.id, c.finished_at, c.schedule_name IS NULL AS movable FROM (
         SELECT id FROM \`${t}\` FORCE INDEX (idx_finished)
         WHERE status = 'SUCCESS' AND (finished_at > ? OR (finished_at = ? AND id > ?))
           AND id < (SELECT MAX(id) FROM \`${t}\`)
         ORDER BY finished_at, id LIMIT ?
       ) AS candidate STRAIGHT_JOIN \`${t}\` AS c FORCE INDEX (PRIMARY) ON c.id = candidate.id
       WHERE c.status = 'SUCCESS'
       ORDER BY c.finished_at, c.id FOR UPDATE${skipLocked ? ' SKIP LOCKED' : ''}`,
    copy: `INSERT INTO \`${historyTable(t)}\` (${columns})
       SELECT ${columns} FROM \`${t}\` FORCE INDEX (PRIMARY) WHERE id IN (?) AND status = 'SUCCESS'`,
    remove: `DELETE FROM \`${t}\` WHERE id IN (?) AND status = 'SUCCESS'`,
  };
}

/**
 * Moves the finished rows of one store's command table into its history: run to its end by each
 * purge of finished commands, and from the first such purge on also nudged by the hot paths (at
 * most once per MOVE_INTERVAL_MS, one move at a time, in the background).
 *
 * Without a retention nothing moves between purges: a move copies each command once more (an
 * insert into the history, a delete from the command table), which pays for itself by sparing the
 * retention's delete of the same row minutes later from pages long out of the buffer pool, and by
 * the partitions' drops; with no retention there is no such delete, and the drain of a backlog
 * measured 0.68× with the moves (docs/performance.md).
 */
export class HistoryMover {
  #active = false;
  #running: Promise<number> | null = null;
  #lastStart = Number.NEGATIVE_INFINITY;
  /** Where the next move starts reading idx_finished: (finished_at, id). */
  #since: MovePosition = START;
  #failing = false;
  #closed = false;

  constructor(
    private readonly pool: Pool,
    private readonly table: string,
    private readonly skipLocked: () => Promise<boolean>,
    private readonly logger: Logger,
  ) {}

  /** Starts a move in the background unless one ran within MOVE_INTERVAL_MS or runs now. */
  nudge(): void {
    if (!this.#active || this.#closed || this.#running !== null) return;
    const now = Date.now();
    if (now - this.#lastStart < MOVE_INTERVAL_MS) return;
    this.#lastStart = now;
    // Its failure was logged (#start); the next nudge tries again.
    this.#start(MOVE_BATCHES).catch(() => undefined);
  }

  /**
   * Moves everything movable now (after a move already running), batch after batch, reading from
   * the start of the finished rows: what a nudged move passed over (a row finished long before its
   * transaction committed, one locked by another transaction, the rows of an older version) goes too.
   */
  async moveAll(): Promise<number> {
    this.#active = true;
    if (this.#running !== null) await this.#running.catch(() => 0);
    this.#since = START;
    return this.#start(Number.POSITIVE_INFINITY);
  }

  /** Stops nudging and waits for a move under way. */
  async close(): Promise<void> {
    this.#closed = true;
    await this.#running?.catch(() => 0);
  }

  #start(batches: number): Promise<number> {
    const run = this.#move(batches).then(
      (moved) => {
        if (this.#failing)
          this.logger.info({ table: this.table }, 'asynccmd: finished commands move to the history again');
        this.#failing = false;
        return moved;
      },
      (e: unknown) => {
        // The next nudge tries again; what stayed is read where it is, and purged there. A lost
        // race (a deadlock, a lock wait, on Galera another node's move) is no trouble to report.
        if (isLockConflict(e)) throw e;
        if (!this.#failing)
          this.logger.warn(
            { err: e, table: this.table },
            'asynccmd: finished commands could not be moved to the history; they stay in the command table for now',
          );
        this.#failing = true;
        throw e;
      },
    );
    const tracked = run.finally(() => {
      if (this.#running === tracked) this.#running = null;
    });
    this.#running = tracked;
    // A background move's failure is reported above; moveAll's caller gets it from `run`.
    tracked.catch(() => undefined);
    return run;
  }

  async #move(batches: number): Promise<number> {
    const sql = moveSql(this.table, await this.skipLocked());
    let total = 0;
    let position = this.#since;
    let newest: string | null = null;
    for (let i = 0; i < batches; i++) {
      const from = position;
      const batch = await inTransaction(this.pool, true, async (conn) => {
        const picked = await select<{ id: string; finished_at: string; movable: number | string }>(
          conn,
          sql.pick,
          [from.at, from.at, from.id, MOVE_BATCH],
        );
        const ids = picked.filter((r) => Number(r.movable) === 1).map((r) => String(r.id));
        if (ids.length > 0) {
          const copied = await write(conn, sql.copy, [ids]);
          const removed = await write(conn, sql.remove, [ids]);
          // Both statements name rows this transaction holds locked: a difference is a race this
          // batch must not commit (on Galera, another node's write can abort it unseen).
          if (copied.affectedRows !== ids.length || removed.affectedRows !== ids.length)
            throw new LostRaceError('a move of finished commands to the history');
        }
        const last = picked[picked.length - 1];
        return { picked: picked.length, moved: ids.length, last };
      });
      total += batch.moved;
      if (batch.last !== undefined) {
        position = { at: batch.last.finished_at, id: String(batch.last.id) };
        newest = batch.last.finished_at;
      }
      if (batch.picked < MOVE_BATCH) break;
    }
    // The next move looks back a little from the newest row read: a row finished before it may
    // commit after this move read past its place.
    if (newest !== null) {
      const back = toUtcText(new Date(fromUtcText(newest).getTime() - MOVE_LOOKBACK_MS));
      if (back > this.#since.at) this.#since = { at: back, id: '0' };
    }
    return total;
  }
}

/** The longest a partition's DDL waits for the history's metadata lock (MySQL counts whole seconds). */
export const PARTITION_LOCK_TIMEOUT_S = 1;

/** ER_LOCK_WAIT_TIMEOUT: also what a metadata lock not had in time gives. */
const LOCK_WAIT_TIMEOUT = 1205;
/** ER_TABLEACCESS_DENIED_ERROR, ER_DBACCESS_DENIED_ERROR, ER_SPECIFIC_ACCESS_DENIED_ERROR. */
const ACCESS_DENIED = new Set([1142, 1044, 1227]);

/**
 * The partitions of one store's history: read, dropped past the retention, made ahead of the
 * clock. One instance at a time (a named lock: the others skip the round). Each DDL waits at most
 * PARTITION_LOCK_TIMEOUT_S for the history's metadata lock: a statement waiting for it holds back
 * every later reader and writer of the history, so behind a long transaction that read the history
 * the round gives up (the row-by-row purge still deletes what is due) rather than queue them.
 */
export class HistoryPartitions {
  #warned = false;
  /** The cutoff of the last round that ran to its end (a purge runs batch after batch with one). */
  #doneFor: number | null = null;

  constructor(
    private readonly pool: Pool,
    private readonly table: string,
    private readonly logger: Logger,
  ) {}

  /**
   * Drops the partitions wholly finished before `olderThan` and makes those ahead of the clock.
   * Answers how many rows the dropped partitions held (0 when this round gave up).
   */
  async maintain(olderThan: Date): Promise<number> {
    const cutoff = olderThan.getTime();
    if (cutoff === this.#doneFor) return 0;
    try {
      const dropped = await withConnection(this.pool, (conn) => this.#maintainOn(conn, cutoff));
      if (dropped !== null) this.#doneFor = cutoff;
      return dropped ?? 0;
    } catch (error) {
      const errno = (error as { errno?: unknown } | null)?.errno;
      if (errno === LOCK_WAIT_TIMEOUT) {
        this.logger.info(
          { table: this.table },
          'asynccmd: history partitions not maintained this round: the history was in use for too long',
        );
        return 0;
      }
      if (typeof errno === 'number' && ACCESS_DENIED.has(errno)) {
        if (!this.#warned)
          this.logger.warn(
            { table: this.table },
            "asynccmd: the store's user may not change the history's partitions (it needs ALTER and DROP on it): retention deletes row by row",
          );
        this.#warned = true;
        return 0;
      }
      throw error;
    }
  }

  /** null: another instance holds the round. */
  async #maintainOn(conn: PoolConnection, olderThanMs: number): Promise<number | null> {
    const h = historyTable(this.table);
    const lockName = `asynccmd:partitions:${h}`.slice(0, 64);
    const [locked] = await select<{ ok: number | string | null }>(conn, 'SELECT GET_LOCK(?, 0) AS ok', [
      lockName,
    ]);
    if (Number(locked?.ok) !== 1) return null;
    try {
      await write(conn, `SET SESSION lock_wait_timeout = ${PARTITION_LOCK_TIMEOUT_S}`);
      const read = await select<{ name: string; bound: string | null; now: string }>(
        conn,
        `SELECT PARTITION_NAME AS name, PARTITION_DESCRIPTION AS bound, UTC_TIMESTAMP(3) AS now
           FROM information_schema.PARTITIONS
          WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?
          ORDER BY PARTITION_ORDINAL_POSITION`,
        [h],
      );
      const nowText = read[0]?.now;
      if (nowText === undefined) return 0;
      const nowMs = fromUtcText(nowText).getTime();
      const partitions: HistoryPartition[] = [];
      let lower = Number.NEGATIVE_INFINITY;
      for (const r of read) {
        if (r.name === CATCH_ALL || r.bound === null || /MAXVALUE/i.test(r.bound)) continue;
        const upperMs = fromUtcText(r.bound.replace(/'/g, '')).getTime();
        partitions.push({ name: r.name, lowerMs: lower, upperMs });
        lower = upperMs;
      }
      const plan = partitionPlan(partitions, null, nowMs, olderThanMs, partitionWidthMs(nowMs - olderThanMs));
      if (plan.make.length > 0) {
        // Made first, out of the catch-all partition: empty while the partitions are ahead of the
        // clock, so nothing is copied.
        const made = plan.make.map(
          (p) => `PARTITION ${partitionName(p.lowerMs)} VALUES LESS THAN ('${partitionBound(p.upperMs)}')`,
        );
        await write(
          conn,
          `ALTER TABLE \`${h}\` REORGANIZE PARTITION ${CATCH_ALL} INTO (${made.join(', ')},
             PARTITION ${CATCH_ALL} VALUES LESS THAN (MAXVALUE))`,
        );
      }
      if (plan.drop.length === 0) return 0;
      const names = plan.drop.map((p) => `\`${p.name.replace(/`/g, '')}\``).join(', ');
      // The edges and workflow steps of the commands about to go: a drop has no ids to take them by.
      const [links] = await select<{ linked: number | string }>(conn, anyLinksSql(this.table));
      if (Number(links?.linked) === 1) {
        for (const { table, column } of commandLinks(this.table)) {
          await write(
            conn,
            `DELETE l FROM ${table} AS l JOIN \`${h}\` PARTITION (${names}) AS g ON g.id = l.${column}`,
          );
        }
      }
      const [counted] = await select<{ n: string | number }>(
        conn,
        `SELECT COUNT(*) AS n FROM \`${h}\` PARTITION (${names})`,
      );
      await write(conn, `ALTER TABLE \`${h}\` DROP PARTITION ${names}`);
      return Number(counted?.n ?? 0);
    } finally {
      await write(conn, 'SET SESSION lock_wait_timeout = DEFAULT');
      await select(conn, 'SELECT RELEASE_LOCK(?)', [lockName]);
    }
  }
}

/** A partition's name: `p` and its lower bound in UTC to the minute (`p202612070600`). */
export function partitionName(lowerMs: number): string {
  return `p${new Date(lowerMs).toISOString().slice(0, 16).replace(/[-T:]/g, '')}`;
}

/** A partition's upper bound as DATETIME text (UTC). */
function partitionBound(ms: number): string {
  return new Date(ms).toISOString().slice(0, 19).replace('T', ' ');
}
