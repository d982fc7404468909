import type mysql from 'mysql2/promise';
import type pg from 'pg';
import { mysqlPool } from './mysql.js';
import { pgPool } from './pg.js';

/**
 * One bench at a time per database server. Two runs at once would share the bench schemas and
 * databases (each dropping the other's tables, draining the other's commands) and skew each
 * other's timings, so each run holds a server-side lock for its whole life — a session advisory
 * lock on PostgreSQL, GET_LOCK on MySQL/MariaDB — released when its connection closes, even if
 * the process dies.
 */
const LOCK_NAME = 'asynccmd-bench';
const WAIT_S = 900;

export interface RunLock {
  release(): Promise<void>;
}

export async function lockPostgres(log: (line: string) => void): Promise<RunLock> {
  const pool: pg.Pool = pgPool(1);
  const client = await pool.connect();
  const key = `hashtext('${LOCK_NAME}')`;
  const deadline = Date.now() + WAIT_S * 1000;
  let told = false;
  for (;;) {
    const { rows } = await client.query<{ ok: boolean }>(`SELECT pg_try_advisory_lock(${key}) AS ok`);
    if (rows[0]?.ok) break;
    if (!told) log('PostgreSQL: another bench run holds the bench lock; waiting for it to finish');
    told = true;
    if (Date.now() > deadline) {
      client.release();
      await pool.end();
      throw new Error(`another bench run kept the PostgreSQL bench lock for ${WAIT_S} s`);
    }
    await new Promise((r) => setTimeout(r, 1000));
  }
  return {
    release: async () => {
      await client.query(`SELECT pg_advisory_unlock(${key})`).catch(() => undefined);
      client.release();
      await pool.end();
    },
  };
}

export async function lockMysql(log: (line: string) => void): Promise<RunLock> {
  const pool: mysql.Pool = mysqlPool(1);
  const conn = await pool.getConnection();
  const [free] = await conn.query<mysql.RowDataPacket[]>('SELECT IS_FREE_LOCK(?) AS free', [LOCK_NAME]);
  if (Number(free[0]?.['free']) !== 1) log('MySQL/MariaDB: another bench run holds the bench lock; waiting');
  const [got] = await conn.query<mysql.RowDataPacket[]>('SELECT GET_LOCK(?, ?) AS ok', [LOCK_NAME, WAIT_S]);
  if (Number(got[0]?.['ok']) !== 1) {
    conn.release();
    await pool.end();
    throw new Error(`another bench run kept the MySQL bench lock for ${WAIT_S} s`);
  }
  return {
    release: async () => {
      await conn.query('SELECT RELEASE_LOCK(?)', [LOCK_NAME]).catch(() => undefined);
      conn.release();
      await pool.end();
    },
  };
}
