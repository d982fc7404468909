import type {
  EnqueueTickResult,
  RunTimeScheduleSettings,
  ScheduleDefinition,
  ScheduleRecord,
} from '@asynccmd/core';
import { decodeRunTimeSettings, runTimeScheduleValues, tickRefusal } from '@asynccmd/core/store-kit';
import type { CheckedCommand, CheckedScheduleTick, ScheduleEngine } from '@asynccmd/core/store-kit';
import type { Pool } from 'mysql2/promise';
import { insertedFlowKey } from './flow-keys.js';
import { inTransaction, isDuplicateKey, retryLockConflicts, select, write } from './connection.js';
import { fromUtcText, toUtcText } from './rows.js';
import { DB_NOW } from './sql.js';

/** The bound values of one inserted command: type, biz_key, payload, max_retry, run_at, owner, idempotent, headers. */
export type CommandParams = readonly unknown[];

interface ScheduleRow {
  name: string;
  type: string;
  cron: string;
  timezone: string | null;
  paused: number | string;
  last_tick: string | null;
  active_from: string;
  run_time_settings: string | null;
}

/**
 * Recurring schedules on MySQL/MariaDB: `<table>_schedules` and the unique key uq_schedule_tick on
 * (schedule_name, schedule_tick) of the command table (migration 7). A tick is enqueued in one READ
 * COMMITTED transaction: the schedule row is read, the command inserted — a duplicate-key error
 * there (the only unique key a tick's command can hit: its id is fresh and it holds no idempotency
 * key) means another instance enqueued the tick, and every other error is thrown — and the last
 * tick moved forward. No INSERT IGNORE: it would turn every other error into a warning too.
 */
export class MysqlScheduleStore implements ScheduleEngine {
  readonly #pool: Pool;
  readonly #commandParams: (command: CheckedCommand) => CommandParams;
  readonly #sql: ReturnType<typeof scheduleSql>;

  constructor(pool: Pool, table: string, commandParams: (command: CheckedCommand) => CommandParams) {
    this.#pool = pool;
    this.#commandParams = commandParams;
    this.#sql = scheduleSql(table);
  }

  async declare(rows: readonly ScheduleDefinition[], now: Date): Promise<void> {
    if (rows.length === 0) return;
    const at = toUtcText(now);
    await retryLockConflicts(() =>
      write(
        this.#pool,
        this.#sql.declare(rows.length),
        rows.flatMap((d) => [d.name, d.type, d.cron, d.timezone, at]),
      ),
    );
  }

  async list(): Promise<ScheduleRecord[]> {
    return (await select<ScheduleRow>(this.#pool, this.#sql.list)).map(toSchedule);
  }

  async get(name: string): Promise<ScheduleRecord | null> {
    const [row] = await select<ScheduleRow>(this.#pool, this.#sql.get, [name]);
    return row === undefined ? null : toSchedule(row);
  }

  async setPaused(name: string, paused: boolean, now: Date): Promise<ScheduleRecord | null> {
    const key = name;
    const at = toUtcText(now);
    const flag = paused === true ? 1 : 0;
    // MariaDB has no UPDATE … RETURNING: the row is read back in the same transaction.
    return retryLockConflicts(() =>
      inTransaction(this.#pool, true, async (conn) => {
        await write(conn, this.#sql.setPaused, [flag, at, flag, key]);
        const [row] = await select<ScheduleRow>(conn, this.#sql.get, [key]);
        return row === undefined ? null : toSchedule(row);
      }),
    );
  }

  async enqueueTick(tick: CheckedScheduleTick): Promise<EnqueueTickResult> {
    const { schedule: name, tick: at } = tick;
    const params = this.#commandParams(tick.command);
    const atText = toUtcText(at);
    return retryLockConflicts(() =>
      inTransaction(this.#pool, true, async (conn): Promise<EnqueueTickResult> => {
        const [row] = await select<ScheduleRow>(conn, this.#sql.get, [name]);
        const refused = tickRefusal(row === undefined ? null : toSchedule(row), at);
        if (refused) return refused;
        let id: string;
        try {
          const header = await write(conn, this.#sql.insertTick, [...params, name, atText]);
          id = String(header.insertId);
        } catch (e) {
          if (isDuplicateKey(e)) return { outcome: 'duplicate' };
          throw e;
        }
        await write(conn, this.#sql.advance, [atText, name, atText]);
        return { outcome: 'enqueued', id };
      }),
    );
  }

  async add(
    definition: ScheduleDefinition,
    settings: RunTimeScheduleSettings,
    now: Date,
  ): Promise<ScheduleRecord | null> {
    const values = runTimeScheduleValues(definition, settings, toUtcText(now));
    // No INSERT … RETURNING on MariaDB: a duplicate primary key says the name is taken.
    return retryLockConflicts(() =>
      inTransaction(this.#pool, true, async (conn) => {
        try {
          await write(conn, this.#sql.add, values);
        } catch (e) {
          if (isDuplicateKey(e)) return null;
          throw e;
        }
        const [row] = await select<ScheduleRow>(conn, this.#sql.get, [values[0]]);
        return row === undefined ? null : toSchedule(row);
      }),
    );
  }

  async remove(name: string): Promise<boolean> {
    const header = await write(this.#pool, this.#sql.remove, [name]);
    return header.affectedRows === 1;
  }
}

function scheduleSql(t: string) {
  const s = `\`${t}_schedules\``;
  const columns = 'name, type, cron, timezone, paused, last_tick, active_from, run_time_settings';
  return {
    declare: (rows: number) =>
      `INSERT INTO ${s} (name, type, cron, timezone, paused, last_tick, active_from)
       VALUES ${Array.from({ length: rows }, () => '(?, ?, ?, ?, 0, NULL, ?)').join(', ')}
       ON DUPLICATE KEY UPDATE type = VALUES(type), cron = VALUES(cron), timezone = VALUES(timezone),
         run_time_settings = NULL`,
    // A declaration in code takes over a run-time schedule of its name (run_time_settings = NULL above).
    add: `INSERT INTO ${s} (name, type, cron, timezone, paused, last_tick, active_from, run_time_settings)
       VALUES (?, ?, ?, ?, 0, NULL, ?, ?)`,
    list: `SELECT ${columns} FROM ${s} ORDER BY name`,
    get: `SELECT ${columns} FROM ${s} WHERE name = ?`,
    // A resume (paused → running) moves active_from; any other call leaves it. SET runs left to
    // right, so active_from is decided before paused changes.
    setPaused: `UPDATE ${s}
       SET active_from = CASE WHEN paused = 1 AND ? = 0 THEN ? ELSE active_from END, paused = ?
       WHERE name = ?`,
    // The id comes from the connection's LAST_INSERT_ID (mysql2's insertId).
    insertTick: `INSERT INTO \`${t}\` (type, biz_key, payload, status, max_retry, next_run_at, owner, idempotent,
         headers, priority, ordering_key, created_at, updated_at, flow_key, schedule_name, schedule_tick)
       VALUES (?, ?, ?, 'PENDING', ?, COALESCE(?, ${DB_NOW}), ?, ?, ?, ?, ?, ${DB_NOW}, ${DB_NOW},
         ${insertedFlowKey(t)}, ?, ?)`,
    advance: `UPDATE ${s} SET last_tick = ? WHERE name = ? AND (last_tick IS NULL OR last_tick < ?)`,
    remove: `DELETE FROM ${s} WHERE name = ?`,
  };
}

function toSchedule(row: ScheduleRow): ScheduleRecord {
  return {
    name: row.name,
    type: row.type,
    cron: row.cron,
    timezone: row.timezone,
    paused: Number(row.paused) === 1,
    lastTick: row.last_tick === null ? null : fromUtcText(row.last_tick),
    activeFrom: fromUtcText(row.active_from),
    runTime: decodeRunTimeSettings(row.run_time_settings),
  };
}
