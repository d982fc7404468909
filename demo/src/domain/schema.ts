import type { Dialect, SqlSession } from '../db/sql.js';
import { CATALOG } from './catalog.js';

/** The column types that differ between the three databases. */
const TYPES: Readonly<Record<Dialect, { id: string; key: string; text: string; big: string; tail: string }>> =
  {
    sqlite: { id: 'INTEGER PRIMARY KEY AUTOINCREMENT', key: 'TEXT', text: 'TEXT', big: 'INTEGER', tail: '' },
    postgres: { id: 'BIGSERIAL PRIMARY KEY', key: 'TEXT', text: 'TEXT', big: 'BIGINT', tail: '' },
    // Keys are VARCHAR: MySQL indexes no TEXT column without a prefix length.
    mysql: {
      id: 'BIGINT AUTO_INCREMENT PRIMARY KEY',
      key: 'VARCHAR(191)',
      text: 'TEXT',
      big: 'BIGINT',
      tail: ' ENGINE=InnoDB DEFAULT CHARSET=utf8mb4',
    },
  };

/**
 * The order service's own tables, in the same database (and schema) as the command table: an
 * order and the commands of its deferred actions commit in one transaction.
 */
function statements(dialect: Dialect): string[] {
  const { id, key, text, big, tail } = TYPES[dialect];
  return [
    `CREATE TABLE IF NOT EXISTS orders (
       id             ${id},
       -- the client's request id: the unique constraint makes a retried request find its order
       request_id     ${key} UNIQUE,
       request_hash   ${key} NOT NULL,
       operation_id   ${key} NOT NULL UNIQUE,
       customer_id    ${key} NOT NULL,
       email          ${key} NOT NULL,
       line_items     ${text} NOT NULL,
       total_cents    ${big} NOT NULL,
       inventory_mode ${key} NOT NULL CHECK (inventory_mode IN ('local', 'downstream')),
       -- how the follow-up runs: 'commands' (the split) or 'inline' (the all-synchronous variant)
       boundary       ${key} NOT NULL CHECK (boundary IN ('commands', 'inline')),
       status         ${key} NOT NULL CHECK (status IN ('CONFIRMED', 'AWAITING_INVENTORY', 'REJECTED')),
       version        INTEGER NOT NULL DEFAULT 1,
       created_at     ${big} NOT NULL,
       decided_at     ${big},
       reject_reason  ${text},
       -- all-synchronous variant only: the step whose failure the client saw as an error
       inline_failure ${key}
     )${tail}`,
    `CREATE TABLE IF NOT EXISTS stock (
       sku       ${key} PRIMARY KEY,
       available INTEGER NOT NULL CHECK (available >= 0)
     )${tail}`,
    // Which command carries which pending fact of an order (a fact may be re-submitted: latest wins).
    `CREATE TABLE IF NOT EXISTS order_command (
       order_id   ${big} NOT NULL,
       fact       ${key} NOT NULL,
       command_id ${key} NOT NULL,
       PRIMARY KEY (order_id, fact),
       FOREIGN KEY (order_id) REFERENCES orders (id)
     )${tail}`,
    // The simulated downstreams' ledger: how many times each side effect was delivered.
    `CREATE TABLE IF NOT EXISTS downstream_call (
       downstream ${key} NOT NULL,
       effect_key ${key} NOT NULL,
       calls      INTEGER NOT NULL,
       first_at   ${big} NOT NULL,
       last_at    ${big} NOT NULL,
       PRIMARY KEY (downstream, effect_key)
     )${tail}`,
    // The read model the SCHEDULED projection command maintains.
    `CREATE TABLE IF NOT EXISTS customer_projection (
       customer_id   ${key} PRIMARY KEY,
       orders        INTEGER NOT NULL,
       total_cents   ${big} NOT NULL,
       last_order_id ${big} NOT NULL
     )${tail}`,
    `CREATE TABLE IF NOT EXISTS projection_applied (
       order_id ${big} NOT NULL,
       version  INTEGER NOT NULL,
       PRIMARY KEY (order_id, version)
     )${tail}`,
  ];
}

/** `INSERT … ` that leaves an existing row alone, in the dialect's words. */
export function insertIgnoring(dialect: Dialect, table: string, columns: string, values: string): string {
  if (dialect === 'mysql') return `INSERT IGNORE INTO ${table} (${columns}) VALUES ${values}`;
  if (dialect === 'sqlite') return `INSERT OR IGNORE INTO ${table} (${columns}) VALUES ${values}`;
  return `INSERT INTO ${table} (${columns}) VALUES ${values} ON CONFLICT DO NOTHING`;
}

/**
 * Creates the tables (idempotent) and stocks the local products once. `transaction` runs the lot
 * in one transaction where the database can (MySQL commits each CREATE TABLE by itself).
 */
export async function migrateOrderSchema(
  session: SqlSession,
  transaction: <T>(fn: (s: SqlSession) => Promise<T>) => Promise<T> = (fn) => fn(session),
): Promise<void> {
  await transaction(async (s) => {
    for (const sql of statements(s.dialect)) await s.run(sql);
    for (const p of CATALOG) {
      if (p.inventoryMode === 'local')
        await s.run(insertIgnoring(s.dialect, 'stock', 'sku, available', '(?, ?)'), [p.sku, p.stock]);
    }
  });
}
