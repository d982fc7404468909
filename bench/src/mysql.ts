import mysql from 'mysql2/promise';

export const MYSQL_CONFIG = {
  host: process.env['BENCH_MYSQL_HOST'] ?? '127.0.0.1',
  port: Number(process.env['BENCH_MYSQL_PORT'] ?? 3306),
  user: process.env['BENCH_MYSQL_USER'] ?? 'root',
  password: process.env['BENCH_MYSQL_PASSWORD'] ?? '',
  supportBigNumbers: true,
  bigNumberStrings: true,
  dateStrings: true,
} as const;

export function mysqlPool(max: number, database?: string): mysql.Pool {
  return mysql.createPool({ ...MYSQL_CONFIG, database, connectionLimit: max });
}

export async function recreateDatabase(pool: mysql.Pool, database: string): Promise<void> {
  await dropDatabase(pool, database);
  await pool.query(`CREATE DATABASE ${database}`);
}

export async function dropDatabase(pool: mysql.Pool, database: string): Promise<void> {
  await pool.query(`DROP DATABASE IF EXISTS ${database}`);
}

export async function mysqlVersion(pool: mysql.Pool): Promise<string> {
  const [rows] = await pool.query<mysql.RowDataPacket[]>('SELECT VERSION() AS v');
  return String(rows[0]?.['v'] ?? '');
}
