import type Database from 'better-sqlite3';
import type {
  EnqueueTickResult,
  RunTimeScheduleSettings,
  ScheduleDefinition,
  ScheduleRecord,
} from '@asynccmd/core';
import { decodeRunTimeSettings, runTimeScheduleValues, tickRefusal } from '@asynccmd/core/store-kit';
import type { CheckedCommand, CheckedScheduleTick, ScheduleEngine } from '@asynccmd/core/store-kit';
import { DB_NOW } from './sql.js';

/** What the schedules need of the store: its handle, its table, its turn-taking and its row encoding. */
export interface SqliteScheduleParts {
  readonly db: Database.Database;
  readonly table: string;
  /** Runs `op` once no transaction of another caller is open on the handle (the store's `run`). */
  readonly run: <T>(op: () => T) => Promise<T>;
  /** The bound parameters of one inserted command: type, biz_key, payload, max_retry, run_at, owner, headers. */
  readonly commandParams: (command: CheckedCommand) => (string | number | null)[];
}

interface ScheduleRow {
  name: string;
  type: string;
  cron: string;
  timezone: string | null;
  paused: number;
  last_tick: number | null;
  active_from: number;
  run_time_settings: string | null;
}

/**
 * Recurring schedules on SQLite: `<table>_schedules` and the (schedule_name, schedule_tick) unique
 * index of the command table (migration 7). A tick is enqueued in one IMMEDIATE transaction; the
 * insert says ON CONFLICT on that index only, so any other failure (a CHECK, NOT NULL) still throws.
 */
export class SqliteScheduleStore implements ScheduleEngine {
  readonly #p: SqliteScheduleParts;
  readonly #statements = new Map<string, Database.Statement>();
  readonly #sql: ReturnType<typeof scheduleSql>;

  constructor(parts: SqliteScheduleParts) {
    this.#p = parts;
    this.#sql = scheduleSql(parts.table);
  }

  async declare(rows: readonly ScheduleDefinition[], now: Date): Promise<void> {
    const activeFrom = now.getTime();
    await this.#p.run(() => {
      const upsert = this.#stmt('declare');
      this.#p.db
        .transaction(() => {
          for (const d of rows) upsert.run(d.name, d.type, d.cron, d.timezone, activeFrom);
        })
        .immediate();
    });
  }

  async list(): Promise<ScheduleRecord[]> {
    return this.#p.run(() => (this.#stmt('list').all() as ScheduleRow[]).map(toSchedule));
  }

  async get(key: string): Promise<ScheduleRecord | null> {
    return this.#p.run(() => {
      const row = this.#stmt('get').get(key) as ScheduleRow | undefined;
      return row === undefined ? null : toSchedule(row);
    });
  }

  async setPaused(key: string, paused: boolean, now: Date): Promise<ScheduleRecord | null> {
    const at = now.getTime();
    return this.#p.run(() => {
      const row = this.#stmt('setPaused').get({ paused: paused ? 1 : 0, now: at, name: key }) as
        ScheduleRow | undefined;
      return row === undefined ? null : toSchedule(row);
    });
  }

  async enqueueTick(tick: CheckedScheduleTick): Promise<EnqueueTickResult> {
    const name = tick.schedule;
    const tickAt = tick.tick;
    const at = tickAt.getTime();
    const params = this.#p.commandParams(tick.command);
    return this.#p.run(() =>
      this.#p.db
        .transaction((): EnqueueTickResult => {
          const row = this.#stmt('get').get(name) as ScheduleRow | undefined;
          const refused = tickRefusal(row === undefined ? null : toSchedule(row), tickAt);
          if (refused) return refused;
          const id = this.#stmt('insertTick')
            .pluck()
            .get(...params, name, at) as string | undefined;
          if (id === undefined) return { outcome: 'duplicate' };
          this.#stmt('advance').run(at, name, at);
          return { outcome: 'enqueued', id };
        })
        .immediate(),
    );
  }

  async add(
    definition: ScheduleDefinition,
    settings: RunTimeScheduleSettings,
    now: Date,
  ): Promise<ScheduleRecord | null> {
    const values = runTimeScheduleValues(definition, settings, now.getTime());
    return this.#p.run(() => {
      const row = this.#stmt('add').get(...values) as ScheduleRow | undefined;
      return row === undefined ? null : toSchedule(row);
    });
  }

  async remove(key: string): Promise<boolean> {
    return this.#p.run(() => this.#stmt('remove').run(key).changes === 1);
  }

  #stmt(name: keyof ReturnType<typeof scheduleSql>): Database.Statement {
    let stmt = this.#statements.get(name);
    if (stmt === undefined) this.#statements.set(name, (stmt = this.#p.db.prepare(this.#sql[name])));
    return stmt;
  }
}

function scheduleSql(t: string) {
  const s = `${t}_schedules`;
  const columns = 'name, type, cron, timezone, paused, last_tick, active_from, run_time_settings';
  return {
    declare: `INSERT INTO ${s} (name, type, cron, timezone, paused, last_tick, active_from)
       VALUES (?, ?, ?, ?, 0, NULL, ?)
       ON CONFLICT (name) DO UPDATE SET type = excluded.type, cron = excluded.cron, timezone = excluded.timezone,
         run_time_settings = NULL`,
    // A declaration in code takes over a run-time schedule of its name (run_time_settings = NULL above).
    add: `INSERT INTO ${s} (name, type, cron, timezone, paused, last_tick, active_from, run_time_settings)
       VALUES (?, ?, ?, ?, 0, NULL, ?, ?)
       ON CONFLICT (name) DO NOTHING
       RETURNING ${columns}`,
    list: `SELECT ${columns} FROM ${s} ORDER BY name`,
    get: `SELECT ${columns} FROM ${s} WHERE name = ?`,
    // A resume (paused → running) moves active_from; any other call leaves it.
    setPaused: `UPDATE ${s}
       SET active_from = CASE WHEN paused = 1 AND :paused = 0 THEN :now ELSE active_from END, paused = :paused
       WHERE name = :name
       RETURNING ${columns}`,
    insertTick: `INSERT INTO ${t} (type, biz_key, payload, status, max_retry, next_run_at, owner, idempotent,
         headers, priority, ordering_key, created_at, updated_at, schedule_name, schedule_tick)
       VALUES (?, ?, ?, 'PENDING', ?, COALESCE(?, ${DB_NOW}), ?, 0, ?, ?, ?, ${DB_NOW}, ${DB_NOW}, ?, ?)
       ON CONFLICT (schedule_name, schedule_tick) WHERE schedule_name IS NOT NULL DO NOTHING
       RETURNING CAST(id AS TEXT) AS id`,
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
    paused: row.paused === 1,
    lastTick: row.last_tick === null ? null : new Date(row.last_tick),
    activeFrom: new Date(row.active_from),
    runTime: decodeRunTimeSettings(row.run_time_settings),
  };
}
